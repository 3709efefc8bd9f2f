"""`export` as a library call: read runs, encode when needed, filter, dedup, split, write."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from regen.check.encode import Encoder
from regen.check.mask import Encoded
from regen.check.record import Completion
from regen.check.runner import Tally, read_runs
from regen.check.sample import invalid
from regen.check.stats import StatOptions
from regen.errors import ConfigError, InputError
from regen.export.files import (
    DEFAULT,
    FILE_TYPES,
    SplitWriter,
    claim_output,
    config_name,
    mark_output,
    read_rows,
)
from regen.export.formats import Format
from regen.export.merge import Deduper
from regen.export.select import TRAIN, Filters, prompt_of, split_of
from regen.jsonio import canonical


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
    configs: dict[str, dict[str, int]] = field(default_factory=dict)  # domain -> split -> rows
    with_source_turns: int = 0  # rows whose earlier assistant turns the target did not write
    supervise: str = "regenerated"
    check: dict[str, Any] | None = None  # the check verdict over the same encodings
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    how_to_train: str = ""
    snippet: str = ""

    sampling: Counter = field(default_factory=Counter)  # canonical sampling JSON -> rows
    thinking: Counter = field(default_factory=Counter)  # thinking mode -> rows
    masked_tokens: Counter = field(default_factory=Counter)  # token id -> supervised count
    trainer_skips: dict[str, list[str]] = field(default_factory=dict)  # reason -> row ids
    render_differs: dict[str, list[str]] = field(default_factory=dict)  # reason -> row ids
    schema: Any = None  # the rows' unified pyarrow schema: the card's features

    def to_json(self) -> dict[str, Any]:
        out = {**self.__dict__, "outcomes": dict(self.outcomes), "dropped": dict(self.dropped),
               "template_dropped": dict(self.template_dropped), "thinking": dict(self.thinking),
               "sampling": [{"sampling": orjson.loads(k), "rows": n}
                            for k, n in self.sampling.most_common()]}  # fmt: skip
        del out["masked_tokens"]  # the draft vocabulary file holds what matters of it
        del out["schema"]
        return out

    def render(self) -> str:
        """The plain-text summary the CLI prints."""
        splits = ", ".join(f"{k} {v}" for k, v in self.written.items()) or "nothing"
        lines = [f"wrote {self.out_dir} ({self.format}): {splits}"]
        lines += [f"  {Path(f).relative_to(self.out_dir)}" for f in self.files]
        lines.append(f"read {self.read} completions; " + _counts("dropped", self.dropped)
                     + "; " + _counts("merge", self.outcomes))  # fmt: skip
        if self.kept_existing:
            lines.append(f"kept {self.kept_existing} rows of the earlier export")
        if self.check is not None:
            failed = ", ".join(self.check["failed_rules"])
            lines.append(
                f"check: {self.check['verdict'].upper()}" + (f" ({failed})" * bool(failed))
            )
        lines += [f"warning: {w}" for w in self.warnings]
        lines.append(f"train with: {self.how_to_train.replace('OUT', self.out_dir)}")
        if self.snippet:
            lines.append(self.snippet)
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
    split_seed: int = 0,
    file_type: str = "jsonl",
    merge_into: Path | None = None,
    overwrite: bool = False,
    on_row: Callable[[str], None] | None = None,
    check_limits: dict[str, float | None] | None = None,
    count_tokens: bool = False,
) -> ExportSummary:
    """Write the runs' completions to `out_dir` as `fmt`, one config per domain. An existing
    export there, or any other non-empty directory, is refused unless `overwrite` (or
    `merge_into` is it). With an encoder, the check rules (`check_limits`) are judged over the
    same encodings; `count_tokens` counts supervised token ids (the draft vocabulary)."""
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
    if count_tokens and encoder is None:
        raise ConfigError(
            "--draft-vocab-size counts the supervised tokens: it needs the target's tokenizer",
            hint="pass --tokenizer (the same one you give `regen check`)",
        )
    dirs = list(output_dirs)
    fraction = eval_fraction if fmt.is_training_set else 0.0
    dedup = Deduper.over(r for _, _, r in read_rows(merge_into)) if merge_into else Deduper()
    summary = ExportSummary(fmt.name, str(out_dir.resolve()), how_to_train=fmt.how_to_train,
                            snippet=fmt.snippet)  # fmt: skip
    summary.supervise = fmt.supervise
    tally = None
    if encoder is not None and check_limits is not None:
        tally = Tally(StatOptions(degenerate_at=filters.degenerate_at), per_sample=None)
    writer = SplitWriter(out_dir, file_type)
    try:
        for completion, enc in _encoded(read_runs(dirs, on_row), encoder, summary, tally):
            reason = filters.reason_to_drop(completion, enc)
            if reason:
                summary.dropped[reason] += 1
                continue
            _note(summary, fmt, completion, enc, count_tokens)
            row = fmt.row(completion, enc)
            problem = fmt.problem(row)
            if problem:
                summary.trainer_skips.setdefault(problem, []).append(row["id"])
            differs = _render_differs(fmt, row, enc, encoder)
            if differs:
                summary.render_differs.setdefault(differs, []).append(row["id"])
            outcome = dedup.classify(row)
            summary.outcomes[outcome] += 1
            if outcome in ("added", "replaced"):
                split = split_of(str(completion.raw.get("id")), fraction, split_seed)
                writer.write(_config(fmt, completion.category), split, row)
        for row in fmt.extra_rows(dirs):
            writer.write(DEFAULT, TRAIN, row)
        for config, _, row in read_rows(merge_into) if merge_into else ():
            if str(row["id"]) not in dedup.replaced_ids:
                summary.kept_existing += 1
                split = split_of(prompt_of(str(row["id"])), fraction, split_seed)
                writer.write(_config(fmt, config), split, row)
        summary.files = [str(p.resolve()) for p in writer.commit()]
        summary.schema = writer.schema
    except BaseException:
        writer.abort()
        raise
    if tally is not None and encoder is not None and check_limits is not None:
        summary.check = tally.report(encoder, check_limits, dirs).to_json()
    summary.written = dict(writer.counts)
    summary.configs = writer.by_config
    summary.warnings = export_warnings(fmt, summary)
    mark_output(out_dir, summary)
    return summary


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


def _ids(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")


TEMPLATE_DROPS = {"reasoning_dropped": "reasoning", "tools_dropped": "tool calls"}


def export_warnings(fmt: Format, summary: ExportSummary) -> list[str]:
    out = [w for w in [fmt.reasoning_warning(summary.with_reasoning),
                       fmt.supervision_warning(summary.with_source_turns)] if w]  # fmt: skip
    for reason, ids in summary.trainer_skips.items():
        out.append(f"{len(ids)} rows that {fmt.trainer} would skip: {reason} ({_ids(ids)})")
    for reason, ids in summary.render_differs.items():
        out.append(f"{len(ids)} rows that SpecForge tokenises differently from --format "
                   f"specforge-tokenized: {reason} ({_ids(ids)})")  # fmt: skip
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
    records: Iterable[dict], encoder: Encoder | None, summary: ExportSummary, tally: Tally | None
) -> Iterator[tuple[Completion, Encoded | None]]:
    """Readable completions with their encoding; unusable ones are counted as dropped (and
    judged by the check `tally`, when there is one)."""

    def valid() -> Iterator[Completion]:
        for raw in records:
            summary.read += 1
            try:
                yield Completion.of(raw)
            except InputError as err:
                summary.dropped[err.kind] += 1
                if tally is not None:
                    tally.add(invalid(raw, err))

    if encoder is None:
        yield from ((c, None) for c in valid())
        return
    for completion, enc in encoder.stream(valid()):
        if tally is not None:
            tally.feed(completion, enc, encoder)
        if isinstance(enc, InputError):
            summary.dropped[enc.kind] += 1  # an all-zero mask is never exported
            continue
        yield completion, enc


__all__ = ["FILE_TYPES", "ExportSummary", "export_run"]
