"""`export` as a library call: read runs, encode when needed, filter, dedup, split, write."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from regen.errors import ConfigError
from regen.export.files import (
    DEFAULT,
    FILE_TYPES,
    SPLITS,
    SplitWriter,
    claim_output,
    config_name,
    mark_output,
    read_rows,
)
from regen.export.formats import Format
from regen.export.holdout_split import draw_holdout, validate_holdout
from regen.export.merge import Deduper
from regen.export.request import ExportRequest
from regen.export.select import TRAIN, Filters, split_of
from regen.export.summary import ExportSummary, export_warnings
from regen.export.work import ExportJob, Prepared, needs_render, prepare_lines
from regen.finished.encode import Encoder
from regen.finished.holdout import HeldOut
from regen.finished.read import read_run_lines
from regen.finished.record import Completion
from regen.finished.run_state import NOT_JSON, lines_not_json
from regen.finished.verdict import Judge
from regen.parallel import Workers, flat_map


def export_run(
    request: ExportRequest,
    *,
    on_row: Callable[[str], None] | None = None,
    workers: Workers | None = None,
) -> ExportSummary:
    """Do what `request` asks (export/request.py says what each field means); `on_row(run)`
    is called for each line read (a progress bar). `workers` prepare the rows (None: this
    process); the files are the same bytes whatever their number."""
    fmt, encoder, filters, out_dir = request.fmt, request.encoder, request.filters, request.out_dir
    merge_into, by_score, judge = request.merge_into, request.by_score, request.judge
    _validate(request)
    validate_holdout(fmt, request.holdout, merge_into)
    into_itself = merge_into is not None and merge_into.resolve() == out_dir.resolve()
    claim_output(out_dir, overwrite=request.overwrite, merging=into_itself)
    dirs = list(request.output_dirs)
    where = request.out_name or str(out_dir.resolve())
    summary = ExportSummary(
        fmt.name, where, how_to_train=fmt.how_to_train, snippet=fmt.snippet, supervise=fmt.supervise
    )
    tally = None
    if encoder is not None and judge is not None:
        tally = judge.verdict(filters.degenerate_at)
    dedup = Deduper(fmt.key)
    if merge_into:
        dedup = Deduper.over((fmt.upgrade(r) for _, _, r in read_rows(merge_into)), fmt.key)
    fraction = request.eval_fraction if fmt.is_training_set else 0.0
    writer = SplitWriter(out_dir, request.file_type, request.max_file_bytes)
    drawn, unanswered = draw_holdout(request.holdout, dirs)
    summary.holdout = drawn.to_json() if drawn is not None else None
    run = _Pass(
        fmt=fmt,
        summary=summary,
        dedup=dedup,
        writer=writer,
        fraction=fraction,
        seed=request.split_seed,
        held=drawn,
    )
    held = by_score.holder(out_dir) if by_score and by_score.order == "hard-first" else None
    job = _job(
        fmt,
        encoder,
        filters,
        judge=judge if tally is not None else None,
        count_tokens=request.count_tokens,
        columnar=request.file_type == "parquet",
    )
    not_json = 0
    try:
        for item in flat_map(workers, job, prepare_lines, read_run_lines(dirs, on_row)):
            if item.dropped == NOT_JSON:  # no completion: named below, never a row read
                not_json += 1
                continue
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
        summary.how_to_train = fmt.train_settings(trains).replace("SPLITS", _splits(committed))
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
    if not_json:
        summary.lines_not_json = {"count": not_json, "first": lines_not_json(dirs)}
    summary.warnings = export_warnings(fmt, summary) + unanswered
    mark_output(out_dir, summary)
    return summary


def _splits(files: list[Path]) -> str:
    """The splits written, as a sentence names them: `a train split`, `train and
    validation splits`."""
    names = [s for s in SPLITS if any(f.name.startswith(f"{s}-") for f in files)] or ["train"]
    if len(names) == 1:
        return f"a {names[0]} split"
    return f"{', '.join(names[:-1])} and {names[-1]} splits"


def _validate(request: ExportRequest) -> None:
    """Refuse a bad combination before anything is written."""
    fmt, encoder, filters = request.fmt, request.encoder, request.filters
    if (fmt.needs_tokenizer or filters.needs_mask) and encoder is None:
        raise ConfigError(
            f"--format {fmt.name} with these filters needs the target's tokenizer",
            hint="pass --tokenizer (the same one you give `regen check`)",
        )
    if request.count_tokens and encoder is None:
        raise ConfigError(
            "--draft-vocab-size counts the supervised tokens: it needs the target's tokenizer",
            hint="pass --tokenizer (the same one you give `regen check`)",
        )
    if request.file_type not in fmt.file_types:
        raise ConfigError(
            f"--format {fmt.name} writes {' or '.join(fmt.file_types)}, not {request.file_type}"
        )
    if not 0 <= request.eval_fraction < 1:
        raise ConfigError("--val-fraction must be in [0, 1)")


def _job(
    fmt: Format,
    encoder: Encoder | None,
    filters: Filters,
    *,
    judge: Judge | None,
    count_tokens: bool,
    columnar: bool,
) -> ExportJob:
    """What each worker is handed once. A target that needs regen's render of each row
    (to compare with the trainer's) is re-tokenised; the others take a sample's ids and mask
    from its stored token ids where they cover it (`regen check` guards that they agree)."""
    if encoder is not None:
        encoder = encoder.with_stored_ids(not needs_render(fmt))
    return ExportJob(
        fmt=fmt,
        encoder=encoder,
        filters=filters,
        judge=judge,
        count_tokens=count_tokens,
        columnar=columnar,
    )


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


__all__ = ["FILE_TYPES", "ExportRequest", "ExportSummary", "export_run"]
