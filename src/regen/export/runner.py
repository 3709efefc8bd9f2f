"""`export` as a library call: read runs, encode when needed, filter, dedup, split, write."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regen.check.encode import Encoder
from regen.check.mask import Encoded
from regen.check.record import Completion
from regen.check.runner import Tally, read_runs
from regen.check.stats import StatOptions
from regen.errors import ConfigError, InputError
from regen.export.by_score import ScoreSelect
from regen.export.files import (
    DEFAULT,
    FILE_TYPES,
    SplitWriter,
    claim_output,
    config_name,
    mark_output,
    read_rows,
)
from regen.export.format_base import named
from regen.export.formats import Format
from regen.export.merge import Deduper
from regen.export.select import TRAIN, Filters, split_of
from regen.export.summary import TEMPLATE_DROPS, ExportSummary, export_warnings
from regen.jsonio import canonical
from regen.score.holdout import HeldOut, Holdout, prompts_of
from regen.storage import open_store


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
    check_limits: dict[str, float | None] | None = None,
    count_tokens: bool = False,
    by_score: ScoreSelect | None = None,
    holdout: Holdout | None = None,
    out_name: str | None = None,
) -> ExportSummary:
    """Write the runs' completions to `out_dir` as `fmt`, one config per domain. An existing
    export there, or any other non-empty directory, is refused unless `overwrite` (or
    `merge_into` is it). With an encoder, the check rules (`check_limits`) are judged over the
    rows written (after the filters), from the same encodings; `count_tokens` counts
    supervised token ids (the draft vocabulary). `holdout` writes a `holdout` split of the
    prompts it draws (score/holdout.py), which `score --holdout` draws again. `out_name`: how
    the summary names the export's place (a bucket URL when `out_dir` is its local stand-in)."""
    _validate(fmt, encoder, filters, file_type, eval_fraction, count_tokens)
    _validate_holdout(fmt, holdout, merge_into)
    into_itself = merge_into is not None and merge_into.resolve() == out_dir.resolve()
    claim_output(out_dir, overwrite=overwrite, merging=into_itself)
    dirs = list(output_dirs)
    where = out_name or str(out_dir.resolve())
    summary = ExportSummary(fmt.name, where, how_to_train=fmt.how_to_train,
                            snippet=fmt.snippet, supervise=fmt.supervise)  # fmt: skip
    tally = None
    if encoder is not None and check_limits is not None:
        tally = Tally(StatOptions(degenerate_at=filters.degenerate_at), per_sample=None)
    dedup = Deduper(fmt.key)
    if merge_into:
        dedup = Deduper.over((fmt.upgrade(r) for _, _, r in read_rows(merge_into)), fmt.key)
    fraction = eval_fraction if fmt.is_training_set else 0.0
    writer = SplitWriter(out_dir, file_type)
    drawn, unanswered = _draw(holdout, dirs)
    summary.holdout = drawn.to_json() if drawn is not None else None
    run = _Pass(fmt, encoder, summary, dedup, writer, fraction, split_seed, count_tokens, drawn)
    held = by_score.holder(out_dir) if by_score and by_score.order == "hard-first" else None
    try:
        for completion, enc in _encoded(read_runs(dirs, on_row), encoder, summary):
            reason = filters.reason_to_drop(completion, enc)
            if not reason and by_score is not None:
                reason = by_score.reason_to_drop(completion)
            if reason:
                summary.dropped[reason] += 1
                continue
            if tally is not None and encoder is not None and enc is not None:
                tally.feed(completion, enc, encoder)  # judged as exported: after the filters
            if held is not None:
                held.add(completion, enc)  # written below, hardest first
            else:
                run.emit(completion, enc)
        for completion, enc in held.hardest_first() if held is not None else ():
            run.emit(completion, enc)
        for row in fmt.extra_rows(dirs):
            run.writer.write(DEFAULT, TRAIN, row)
        for config, _, row in read_rows(merge_into) if merge_into else ():
            run.keep(config, row)
        committed = run.writer.commit()
        summary.files = [f"{where}/{p.relative_to(out_dir).as_posix()}" for p in committed]
        summary.schema = run.writer.schema
    except BaseException:
        run.writer.abort()
        raise
    finally:
        if held is not None:
            held.close()
    if tally is not None and encoder is not None and check_limits is not None:
        summary.check = tally.report(encoder, check_limits, dirs).to_json()
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


def _validate_holdout(fmt: Format, holdout: Holdout | None, merge_into: Path | None) -> None:
    if holdout is None:
        return
    if not fmt.is_training_set:
        raise ConfigError(f"--format {fmt.name} writes one file with no splits: no --holdout")
    if merge_into is not None:
        raise ConfigError(
            "--holdout with --merge-into: the split is drawn over the runs' prompts, and the "
            "earlier export's rows were split without them",
            hint="export the runs together in one call (regen export RUN1 RUN2 ...)",
        )


def _draw(holdout: Holdout | None, dirs: list) -> tuple[HeldOut | None, list[str]]:
    """The held-out split, drawn per run as `score RUN --holdout` draws it, and a warning for
    each run that has not answered every prompt of its prompt file."""
    if holdout is None:
        return None, []
    parts, notes = [], []
    for run in dirs:
        part = holdout.draw(prompts_of(read_runs([run])))
        lines = ((open_store(run).read_manifest() or {}).get("input") or {}).get("lines")
        parts.append(part)
        notes += [n for n in [part.unanswered(str(run), lines)] if n]
    return HeldOut.union(parts), notes


@dataclass
class _Pass:
    """One export pass: each kept completion becomes a row in its domain and split."""

    fmt: Format
    encoder: Encoder | None
    summary: ExportSummary
    dedup: Deduper
    writer: SplitWriter
    fraction: float
    seed: int
    count_tokens: bool
    held: HeldOut | None = None

    def split(self, prompt_id: str) -> str:
        """A held-out prompt's rows go to `holdout`; the others to train or validation."""
        if self.held is not None and prompt_id in self.held.ids:
            return self.held.split_of(prompt_id)
        return split_of(prompt_id, self.fraction, self.seed)

    def emit(self, completion: Completion, enc: Encoded | None) -> None:
        summary, fmt = self.summary, self.fmt
        _note(summary, fmt, completion, enc, self.count_tokens)
        row = fmt.row(completion, enc)
        problem = fmt.problem(row)
        if problem:
            summary.trainer_skips.setdefault(problem, []).append(named(completion))
        differs = _render_differs(fmt, row, enc, self.encoder)
        if differs:
            summary.render_differs.setdefault(differs, []).append(named(completion))
        outcome = self.dedup.classify(row)
        summary.outcomes[outcome] += 1
        if outcome in ("added", "replaced"):
            self.writer.write(_config(fmt, completion.category), self.split(completion.id), row)

    def keep(self, config: str, row: dict[str, Any]) -> None:
        """A row of the earlier export (--merge-into) that no new row replaced, in today's
        shape (an export written before the sample had its own field is upgraded)."""
        row = self.fmt.upgrade(row)
        prompt_id, sample = self.fmt.key(row)
        if (prompt_id, sample) not in self.dedup.replaced:
            self.summary.kept_existing += 1
            self.writer.write(_config(self.fmt, config), self.split(prompt_id), row)


def _render_differs(fmt: Format, row: dict, enc: Encoded | None,
                    encoder: Encoder | None) -> str | None:  # fmt: skip
    """For the conversation target rendered by the trainer (SpecForge): does its render of
    the row differ from regen's tokenised one? Only known with a tokenizer."""
    check = getattr(fmt, "render_differs", None)
    if check is None or enc is None or encoder is None:
        return None
    return check(row, enc, encoder.tok)


def _config(fmt: Format, domain: str) -> str:
    return config_name(domain) if fmt.per_domain else DEFAULT


def _note(summary: ExportSummary, fmt: Format, completion: Completion, enc: Encoded | None,
          count_tokens: bool) -> None:  # fmt: skip
    """What the summary and the card say about the exported rows."""
    summary.with_reasoning += bool(completion.reasoning.strip())
    if enc is not None and fmt.needs_tokenizer:
        summary.template_dropped.update(f for f in enc.flags if f in TEMPLATE_DROPS)
    summary.without_system += completion.messages[0].get("role") != "system"
    summary.sampling[canonical((completion.raw.get("meta") or {}).get("sampling"))] += 1
    summary.thinking[completion.thinking] += 1
    written = completion.regenerated
    summary.with_source_turns += any(
        m.get("role") == "assistant" and i not in written for i, m in enumerate(completion.messages)
    )
    if count_tokens and enc is not None:
        for start, end in enc.spans:
            summary.masked_tokens.update(enc.input_ids[start:end])


def _encoded(
    records: Iterable[dict], encoder: Encoder | None, summary: ExportSummary
) -> Iterator[tuple[Completion, Encoded | None]]:
    """Readable completions with their encoding; unusable ones are counted as dropped (and,
    never exported, not judged: the card's check is over the rows the export holds)."""

    def valid() -> Iterator[Completion]:
        for raw in records:
            summary.read += 1
            try:
                yield Completion.of(raw)
            except InputError as err:
                summary.dropped[err.kind] += 1

    if encoder is None:
        yield from ((c, None) for c in valid())
        return
    for completion, enc in encoder.stream(valid()):
        if isinstance(enc, InputError):
            summary.dropped[enc.kind] += 1  # an all-zero mask is never exported
            continue
        yield completion, enc


__all__ = ["FILE_TYPES", "ExportSummary", "export_run"]
