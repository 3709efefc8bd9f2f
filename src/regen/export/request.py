"""What one `regen export` is asked to do, as one value: the CLI builds it from its options
and hands it to `export_run`; a test or a script builds it the same way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from regen.export.by_score import ScoreSelect
from regen.export.format_base import Format
from regen.export.select import Filters
from regen.finished.encode import Encoder
from regen.finished.holdout import Holdout
from regen.finished.verdict import Judge


@dataclass(frozen=True)
class ExportRequest:
    """Write the runs' completions (`output_dirs`) to `out_dir` as `fmt`, one config per
    domain. An existing export there, or any other non-empty directory, is refused unless
    `overwrite` (or `merge_into` is it). With an encoder, `judge` (check's rules:
    check/card.py) judges the rows written (after the filters), from the same encodings;
    `count_tokens` counts supervised token ids (the draft vocabulary). `holdout` writes a
    `holdout` split of the prompts it draws (finished/holdout.py), which `score --holdout`
    draws again. `out_name`: how the summary names the export's place (a bucket URL when
    `out_dir` is its local stand-in). A data file is closed at `max_file_bytes` (None: the
    file type's own size; 0: one file a split; see `files.SplitWriter`)."""

    output_dirs: Sequence[str | Path]
    out_dir: Path
    fmt: Format
    encoder: Encoder | None
    filters: Filters
    eval_fraction: float = 0.0
    split_seed: int = 0
    file_type: str = "jsonl"
    merge_into: Path | None = None
    overwrite: bool = False
    judge: Judge | None = None
    count_tokens: bool = False
    by_score: ScoreSelect | None = None
    holdout: Holdout | None = None
    out_name: str | None = None
    max_file_bytes: int | None = None
