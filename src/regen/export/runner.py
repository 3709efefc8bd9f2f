"""`export` as a library call: read runs, encode when needed, filter, dedup, split, write."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from regen.errors import ConfigError
from regen.export.by_score import ScoreSelect
from regen.export.files import (
    DEFAULT,
    FILE_TYPES,
    JSONL_MB,
    SplitWriter,
    claim_output,
    config_name,
    mark_output,
    read_rows,
)
from regen.export.formats import Format
from regen.export.holdout_split import draw_holdout, validate_holdout
from regen.export.merge import Deduper
from regen.export.select import TRAIN, Filters, split_of
from regen.export.summary import ExportSummary, export_warnings
from regen.export.work import ExportJob, Prepared, needs_render, prepare_lines
from regen.finished.encode import Encoder
from regen.finished.holdout import HeldOut, Holdout
from regen.finished.read import read_run_lines
from regen.finished.record import Completion
from regen.finished.verdict import Judge
from regen.parallel import Workers, flat_map


def export_run(
    output_dirs: Iterable[str | Path],
    out_dir: Path,
    fmt: Format,
    *,
    encoder: Encoder | None,
    filters: Filters,
    eval_fraction: float = 0.0,
    split_seed: int = 0,
    file_type: str = "jsonl",
    merge_into: Path | None = None,
    overwrite: bool = False,
    on_row: Callable[[str], None] | None = None,
    judge: Judge | None = None,
    count_tokens: bool = False,
    by_score: ScoreSelect | None = None,
    holdout: Holdout | None = None,
    out_name: str | None = None,
    workers: Workers | None = None,
    max_file_bytes: int | None = JSONL_MB * 2**20,
) -> ExportSummary:
    """Write the runs' completions to `out_dir` as `fmt`, one config per domain. An existing
    export there, or any other non-empty directory, is refused unless `overwrite` (or
    `merge_into` is it). With an encoder, `judge` (check's rules: check/card.py) judges the
    rows written (after the filters), from the same encodings; `count_tokens` counts
    supervised token ids (the draft vocabulary). `holdout` writes a `holdout` split of the
    prompts it draws (finished/holdout.py), which `score --holdout` draws again. `out_name`: how
    the summary names the export's place (a bucket URL when `out_dir` is its local stand-in).
    `workers` prepare the rows (None: this process); the files are the same bytes whatever
    their number. A JSONL file is closed at `max_file_bytes` (None: one file a split)."""
    _validate(fmt, encoder, filters, file_type, eval_fraction, count_tokens)
    validate_holdout(fmt, holdout, merge_into)
    into_itself = merge_into is not None and merge_into.resolve() == out_dir.resolve()
    claim_output(out_dir, overwrite=overwrite, merging=into_itself)
    dirs = list(output_dirs)
    where = out_name or str(out_dir.resolve())
    summary = ExportSummary(fmt.name, where, how_to_train=fmt.how_to_train,
                            snippet=fmt.snippet, supervise=fmt.supervise)  # fmt: skip
    tally = None
    if encoder is not None and judge is not None:
        tally = judge.verdict(filters.degenerate_at)
    dedup = Deduper(fmt.key)
    if merge_into:
        dedup = Deduper.over((fmt.upgrade(r) for _, _, r in read_rows(merge_into)), fmt.key)
    fraction = eval_fraction if fmt.is_training_set else 0.0
    writer = SplitWriter(out_dir, file_type, jsonl_bytes=max_file_bytes)
    drawn, unanswered = draw_holdout(holdout, dirs)
    summary.holdout = drawn.to_json() if drawn is not None else None
    run = _Pass(fmt, summary, dedup, writer, fraction, split_seed, drawn)
    held = by_score.holder(out_dir) if by_score and by_score.order == "hard-first" else None
    job = _job(fmt, encoder, filters, judge=judge if tally is not None else None,
               count_tokens=count_tokens,
               columnar=file_type == "parquet")  # fmt: skip
    try:
        for item in flat_map(workers, job, prepare_lines, read_run_lines(dirs, on_row)):
            summary.read += 1
            reason = item.dropped
            if not reason and by_score is not None:
                reason = by_score.reason_to_drop(_labels(item))
            if reason:
                summary.dropped[reason] += 1
                continue
            if tally is not None and item.result is not None:
                tally.add(item.result)  # judged as exported: after the filters
            if held is not None:
                held.add(item.key, item)  # written below, hardest first
            else:
                run.emit(item)
        for item in held.hardest_first() if held is not None else ():
            run.emit(item)
        for row in fmt.extra_rows(dirs):
            run.writer.write(DEFAULT, TRAIN, row)
        for config, _, row in read_rows(merge_into) if merge_into else ():
            run.keep(config, row)
        committed = run.writer.commit()
        summary.files = [f"{where}/{p.relative_to(out_dir).as_posix()}" for p in committed]
        trains = sum(p.name.startswith("train-") for p in committed)
        summary.how_to_train = fmt.train_settings(trains)
        summary.schema = run.writer.schema
        summary.masked_tokens = run.masked_counts()
    except BaseException:
        run.writer.abort()
        raise
    finally:
        if held is not None:
            held.close()
    if tally is not None and encoder is not None:
        summary.check = tally.report(encoder, dirs)
    summary.written, summary.configs = dict(run.writer.counts), run.writer.by_config
    summary.by_score = by_score.to_json() if by_score is not None else None
    summary.warnings = export_warnings(fmt, summary) + unanswered
    mark_output(out_dir, summary)
    return summary


def _validate(fmt: Format, encoder: Encoder | None, filters: Filters, file_type: str,
              eval_fraction: float, count_tokens: bool) -> None:  # fmt: skip
    """Refuse a bad combination before anything is written."""
    if (fmt.needs_tokenizer or filters.needs_mask) and encoder is None:
        raise ConfigError(
            f"--format {fmt.name} with these filters needs the target's tokenizer",
            hint="pass --tokenizer (the same one you give `regen check`)",
        )
    if count_tokens and encoder is None:
        raise ConfigError(
            "--draft-vocab-size counts the supervised tokens: it needs the target's tokenizer",
            hint="pass --tokenizer (the same one you give `regen check`)",
        )
    if file_type not in fmt.file_types:
        raise ConfigError(
            f"--format {fmt.name} writes {' or '.join(fmt.file_types)}, not {file_type}"
        )
    if not 0 <= eval_fraction < 1:
        raise ConfigError("--val-fraction must be in [0, 1)")


def _job(fmt: Format, encoder: Encoder | None, filters: Filters, *, judge: Judge | None,
         count_tokens: bool, columnar: bool) -> ExportJob:  # fmt: skip
    """What each worker is handed once. A target that needs regen's render of each row
    (to compare with the trainer's) is re-tokenised; the others take a sample's ids and mask
    from its stored token ids where they cover it (`regen check` guards that they agree)."""
    if encoder is not None:
        encoder = encoder.with_stored_ids(not needs_render(fmt))
    return ExportJob(fmt, encoder, filters, judge, count_tokens, columnar)


def _labels(item: Prepared) -> Completion:
    """What the score selection asks of a row: its (id, sample) and its category."""
    prompt_id, sample = item.key
    return Completion({"id": prompt_id, "sample": sample, "category": item.category})


@dataclass
class _Pass:
    """One export pass: each kept row goes to its domain and split, in read order."""

    fmt: Format
    summary: ExportSummary
    dedup: Deduper
    writer: SplitWriter
    fraction: float
    seed: int
    held: HeldOut | None = None
    masked: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def split(self, prompt_id: str) -> str:
        """A held-out prompt's rows go to `holdout`; the others to train or validation."""
        if self.held is not None and prompt_id in self.held.ids:
            return self.held.split_of(prompt_id)
        return split_of(prompt_id, self.fraction, self.seed)

    def emit(self, item: Prepared) -> None:
        summary, fmt = self.summary, self.fmt
        assert item.row is not None and item.notes is not None
        self._note(item)
        if item.problem:
            summary.trainer_skips.setdefault(item.problem, []).append(item.named)
        if item.differs:
            summary.render_differs.setdefault(item.differs, []).append(item.named)
        outcome = self.dedup.classify_key(fmt.key(item.row), item.content)
        summary.outcomes[outcome] += 1
        if outcome in ("added", "replaced"):
            self.writer.write(_config(fmt, item.category), self.split(item.key[0]), item.row)

    def keep(self, config: str, row: dict[str, Any]) -> None:
        """A row of the earlier export (--merge-into) that no new row replaced, in today's
        shape (an export written before the sample had its own field is upgraded)."""
        row = self.fmt.upgrade(row)
        prompt_id, sample = self.fmt.key(row)
        if (prompt_id, sample) not in self.dedup.replaced:
            self.summary.kept_existing += 1
            self.writer.write(_config(self.fmt, config), self.split(prompt_id), row)

    def _note(self, item: Prepared) -> None:
        """What the summary and the card say about the exported rows."""
        summary, notes = self.summary, item.notes
        assert notes is not None
        summary.with_reasoning += notes.with_reasoning
        summary.template_dropped.update(notes.template_dropped)
        summary.without_system += notes.without_system
        summary.sampling[notes.sampling] += 1
        summary.thinking[notes.thinking] += 1
        summary.with_source_turns += notes.with_source_turns
        if notes.masked is not None:
            ids, counts = notes.masked
            if len(ids) and ids[-1] >= len(self.masked):
                grown = np.zeros(int(ids[-1]) + 1, dtype=np.int64)
                grown[: len(self.masked)] = self.masked
                self.masked = grown
            self.masked[ids] += counts

    def masked_counts(self) -> Counter:
        """Supervised token id -> count, as the draft vocabulary reads it."""
        ids = np.flatnonzero(self.masked)
        return Counter(dict(zip(ids.tolist(), self.masked[ids].tolist(), strict=True)))


def _config(fmt: Format, domain: str) -> str:
    return config_name(domain) if fmt.per_domain else DEFAULT


__all__ = ["FILE_TYPES", "ExportSummary", "export_run"]
