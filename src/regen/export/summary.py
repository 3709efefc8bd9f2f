"""What an export did: the counts, the warnings and how to train, printed and kept as JSON."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from regen.export.by_score import render_by_score
from regen.export.format_base import CUT_ANSWER, Format
from regen.export.train_with import bucket_train_with
from regen.finished.record import sample_label
from regen.urls import is_url


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
    by_score: dict[str, Any] | None = None  # kept/dropped per category by regen score's results
    holdout: dict[str, Any] | None = None  # the held-out split as drawn (finished/holdout.py)
    lines_not_json: dict[str, Any] | None = None  # {"count", "first": [{"file", "line"}]}
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    how_to_train: str = ""
    snippet: str = ""

    sampling: Counter = field(default_factory=Counter)  # canonical sampling JSON -> rows
    thinking: Counter = field(default_factory=Counter)  # thinking mode -> rows
    masked_tokens: Counter = field(default_factory=Counter)  # token id -> supervised count
    # reason -> the rows ({"id", "sample"})
    trainer_skips: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    render_differs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    schema: Any = None  # the rows' unified pyarrow schema: the card's features

    def to_json(self) -> dict[str, Any]:
        out = {
            **self.__dict__,
            "outcomes": dict(self.outcomes),
            "dropped": dict(self.dropped),
            "template_dropped": dict(self.template_dropped),
            "thinking": dict(self.thinking),
            "sampling": [
                {"sampling": orjson.loads(k), "rows": n} for k, n in self.sampling.most_common()
            ],
        }
        del out["masked_tokens"]  # the draft vocabulary file holds what matters of it
        del out["schema"]
        return out

    def render(self) -> str:
        """The plain-text summary the CLI prints."""
        splits = ", ".join(f"{k} {v}" for k, v in self.written.items()) or "nothing"
        lines = [f"wrote {self.out_dir} ({self.format}): {splits}"]
        lines += [f"  {Path(f).relative_to(self.out_dir)}" for f in self.files]
        lines.append(
            f"read {self.read} completions; "
            + _counts("dropped", self.dropped)
            + "; "
            + _counts("merge", self.outcomes)
        )
        if self.kept_existing:
            lines.append(f"kept {self.kept_existing} rows of the earlier export")
        if self.by_score is not None:
            lines.append(render_by_score(self.by_score))
        if self.check is not None:
            failed = ", ".join(self.check["failed_rules"])
            lines.append(
                f"check: {self.check['verdict'].upper()}" + (f" ({failed})" * bool(failed))
            )
        lines += [f"warning: {w}" for w in self.warnings]
        lines.append(f"train with: {self.train_with()}")
        if self.snippet:
            lines.append(self.snippet)
        return "\n".join(lines)

    def train_with(self) -> str:
        """The trainer settings on this export: for a bucket, ones that work as printed."""
        if is_url(self.out_dir):
            return bucket_train_with(self.how_to_train, self.out_dir, self.files)
        return self.how_to_train.replace("OUT", self.out_dir)


def _counts(label: str, counts: Counter) -> str:
    items = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.most_common())
    return f"{label}: {items or 'none'}"


def _ids(rows: list[dict[str, Any]]) -> str:
    labels = [sample_label(r["id"], r["sample"]) for r in rows[:5]]
    return ", ".join(labels) + (", ..." if len(rows) > 5 else "")


TEMPLATE_DROPS = {"reasoning_dropped": "reasoning", "tools_dropped": "tool calls"}


def export_warnings(fmt: Format, summary: ExportSummary) -> list[str]:
    out = [
        w
        for w in [
            fmt.reasoning_warning(summary.with_reasoning),
            fmt.supervision_warning(summary.with_source_turns),
        ]
        if w
    ]
    cut = summary.dropped.get(CUT_ANSWER)
    if cut:
        out.append(
            f"{cut} rows cut at --max-output-tokens left out: {fmt.name}'s trainer renders "
            "the conversation and supervises an end-of-turn the target never drew after the "
            "cut answer; --format specforge-tokenized, speculators or tokenized keep them, "
            "their mask ending where the model stopped"
        )
    for reason, ids in summary.trainer_skips.items():
        out.append(f"{len(ids)} rows that {fmt.trainer} would skip: {reason} ({_ids(ids)})")
    for reason, ids in summary.render_differs.items():
        out.append(
            f"{len(ids)} rows that SpecForge tokenises differently from --format "
            f"specforge-tokenized: {reason} ({_ids(ids)})"
        )
    bad = summary.lines_not_json
    if bad:
        places = ", ".join(f"{b['file']} line {b['line']}" for b in bad["first"][:3])
        more = ", ..." if bad["count"] > 3 else ""
        out.append(
            f"{bad['count']} line(s) of the runs are not JSON (a torn write, an edit), not "
            f"read: {places}{more}; delete each and run the same `regen generate` again to "
            "answer those prompts"
        )
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
