"""`export` as a library call: read runs, encode when needed, filter, dedup, split, write."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regen.check.encode import Encoder
from regen.check.mask import Encoded
from regen.check.record import Completion
from regen.check.runner import read_runs
from regen.errors import ConfigError, InputError
from regen.export.by_score import ScoreSelect, render_by_score
from regen.export.files import FILE_TYPES, SplitWriter, claim_output, mark_output, read_rows
from regen.export.formats import Format
from regen.export.merge import Deduper
from regen.export.select import Filters, split_of


@dataclass
class ExportSummary:
    format: str = ""
    out_dir: str = ""
    read: int = 0
    outcomes: Counter = field(default_factory=Counter)  # added / replaced / skipped_*
    dropped: Counter = field(default_factory=Counter)  # filter rule or mask error -> count
    kept_existing: int = 0
    with_reasoning: int = 0
    without_system: int = 0
    template_dropped: Counter = field(default_factory=Counter)  # reasoning/tools not rendered
    written: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    how_to_train: str = ""
    by_score: dict[str, Any] | None = None  # kept/dropped per category by --max-acceptance

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "outcomes": dict(self.outcomes), "dropped": dict(self.dropped),
                "template_dropped": dict(self.template_dropped)}  # fmt: skip

    def render(self) -> str:
        """The plain-text summary the CLI prints."""
        splits = ", ".join(f"{k} {v}" for k, v in self.written.items()) or "nothing"
        lines = [f"wrote {self.out_dir} ({self.format}): {splits}"]
        lines += [f"  {Path(f).name}" for f in self.files]
        lines.append(f"read {self.read} completions; " + _counts("dropped", self.dropped)
                     + "; " + _counts("merge", self.outcomes))  # fmt: skip
        if self.kept_existing:
            lines.append(f"kept {self.kept_existing} rows of the earlier export")
        if self.by_score:
            lines.append(render_by_score(self.by_score))
        lines += [f"warning: {w}" for w in self.warnings]
        lines.append(f"train with: {self.how_to_train.replace('OUT', self.out_dir)}")
        return "\n".join(lines)


def _counts(label: str, counts: Counter) -> str:
    items = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.most_common())
    return f"{label}: {items or 'none'}"


def export_run(
    output_dirs: Iterable[str | Path],
    out_dir: Path,
    fmt: Format,
    *,
    encoder: Encoder | None,
    filters: Filters,
    eval_fraction: float = 0.0,
    file_type: str = "jsonl",
    merge_into: Path | None = None,
    overwrite: bool = False,
    on_row: Callable[[str], None] | None = None,
    by_score: ScoreSelect | None = None,
) -> ExportSummary:
    """Write the runs' completions to `out_dir` as `fmt`. An existing export there, or any
    other non-empty directory, is refused unless `overwrite` (or `merge_into` is it)."""
    if (fmt.needs_tokenizer or filters.needs_mask) and encoder is None:
        raise ConfigError(
            f"--format {fmt.name} with these filters needs the target's tokenizer",
            hint="pass --tokenizer (the same one you give `regen check`)",
        )
    if file_type not in fmt.file_types:
        raise ConfigError(
            f"--format {fmt.name} writes {' or '.join(fmt.file_types)}, not {file_type}"
        )
    if not 0 <= eval_fraction < 1:
        raise ConfigError("--eval-fraction must be in [0, 1)")
    into_itself = merge_into is not None and merge_into.resolve() == out_dir.resolve()
    claim_output(out_dir, overwrite=overwrite, merging=into_itself)
    dedup = Deduper.over(r for _, r in read_rows(merge_into)) if merge_into else Deduper()
    summary = ExportSummary(fmt.name, str(out_dir.resolve()), how_to_train=fmt.how_to_train)
    writer = SplitWriter(out_dir, file_type)
    hard_first = by_score is not None and by_score.order == "hard-first"
    held: list[dict] = []  # hard-first sorts the kept rows before writing (held in memory)
    try:
        for completion, enc in _encoded(read_runs(output_dirs, on_row), encoder, summary):
            reason = filters.reason_to_drop(completion, enc)
            if not reason and by_score is not None:
                reason = by_score.reason_to_drop(completion)
            if reason:
                summary.dropped[reason] += 1
                continue
            summary.with_reasoning += bool(completion.reasoning.strip())
            if enc is not None and fmt.needs_tokenizer:
                summary.template_dropped.update(f for f in enc.flags if f in TEMPLATE_DROPS)
            summary.without_system += completion.messages[0].get("role") != "system"
            row = fmt.row(completion, enc)
            outcome = dedup.classify(row)
            summary.outcomes[outcome] += 1
            if outcome not in ("added", "replaced"):
                continue
            if hard_first:
                held.append(row)
            else:
                writer.write(split_of(row["id"], eval_fraction), row)
        if by_score is not None:
            held.sort(key=lambda r: by_score.hardness(str(r["id"])))
        for row in held:
            writer.write(split_of(row["id"], eval_fraction), row)
        for _, row in read_rows(merge_into) if merge_into else ():
            if str(row["id"]) not in dedup.replaced_ids:
                summary.kept_existing += 1
                writer.write(split_of(str(row["id"]), eval_fraction), row)
        summary.files = [str(p) for p in writer.commit()]
    except BaseException:
        writer.abort()
        raise
    summary.written = dict(writer.counts)
    summary.by_score = by_score.to_json() if by_score is not None else None
    summary.warnings = export_warnings(fmt, summary)
    mark_output(out_dir, summary)
    return summary


TEMPLATE_DROPS = {"reasoning_dropped": "reasoning", "tools_dropped": "tool calls"}


def export_warnings(fmt: Format, summary: ExportSummary) -> list[str]:
    out = [w for w in [fmt.reasoning_warning(summary.with_reasoning)] if w]
    for flag, n in summary.template_dropped.items():
        what = TEMPLATE_DROPS[flag]
        out.append(
            f"{n} rows lose their {what}: the chat template does not render it, so the "
            "tokenised rows do not contain it (see `regen check`, rule " + flag + ")"
        )
    if fmt.name == "specforge" and summary.without_system:
        out.append(
            f"{summary.without_system} rows have no system message: train with a SpecForge "
            "template whose system_prompt is None, or it adds its default one and the context "
            "is not the one the target answered"
        )
    return out


def _encoded(
    records: Iterable[dict], encoder: Encoder | None, summary: ExportSummary
) -> Iterator[tuple[Completion, Encoded | None]]:
    """Readable completions with their encoding; unusable ones are counted as dropped."""

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
