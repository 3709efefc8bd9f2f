"""The report: per-source counts, loud warnings, and the composition of what was written.

The warnings are the historical failures made visible: a dedup rate that means a wrong key,
a source that converts nothing, a blend that is mostly one category.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from regen.prepare.lengths import token_lengths
from regen.prepare.recipe import Recipe
from regen.prepare.stats import SourceStats

if TYPE_CHECKING:
    from regen.prepare.blend import Candidate


@dataclass
class Report:
    data: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def render(self) -> str:
        from regen.prepare.render import render

        return render(self.data)


def build_report(
    recipe: Recipe,
    stats: list[SourceStats],
    chosen: list[tuple[str, Candidate]],
    output: str | Path,  # as the user named it: a path or a bucket URL
    rejects: str | Path | None,  # None: not written (the output is a stream)
) -> Report:
    by_source = Counter(name for name, _ in chosen)
    by_category = Counter(c.category for _, c in chosen)
    data: dict[str, Any] = {
        "output": str(output),
        "rejects": None if rejects is None else str(rejects),
        "seed": recipe.seed,
        "total_requested": recipe.total,
        "written": len(chosen),
        "sources": [s.to_dict() for s in stats],
        "composition": {
            "by_source": _shares(by_source, len(chosen)),
            "by_category": _shares(by_category, len(chosen)),
        },
    }
    if recipe.tokenizer:
        data["prompt_tokens"] = token_lengths(recipe.tokenizer, [c.line for _, c in chosen])
    warnings = source_warnings(recipe, stats) + blend_warnings(recipe, len(chosen), by_category)
    data["warnings"] = warnings
    return Report(data, warnings)


def source_warnings(recipe: Recipe, stats: list[SourceStats]) -> list[str]:
    out = []
    for s in stats:
        if s.read and not s.converted:
            top = s.rejected.most_common(1) or s.skipped.most_common(1)
            why = f"; most common reason: {s.examples[top[0][0]]}" if top else ""
            out.append(f"source {s.name!r} converted 0 of {s.read} records{why}")
        elif s.reject_rate > recipe.reject_warn_rate:
            kind, n = s.rejected.most_common(1)[0]
            out.append(
                f"source {s.name!r} rejected {s.reject_rate:.0%} of its records "
                f"(mostly {kind}: {n}; e.g. {s.examples[kind]}); check its format and role map"
            )
        if s.dedup_rate > recipe.dedup_warn_rate:
            out.append(
                f"source {s.name!r} lost {s.dedup_rate:.0%} of its prompts to dedup "
                f"({s.deduplicated} of {s.converted}; duplicates of "
                f"{', '.join(f'{k}: {v}' for k, v in s.duplicate_of.most_common())}); "
                "a dedup rate this high usually means the records differ in a field the "
                "format does not read"
            )
    for spec, s in zip(recipe.sources, stats, strict=True):
        if spec.ask.count is not None and s.unique < spec.ask.count:
            out.append(
                f"source {s.name!r} has {s.unique} unique prompts, "
                f"fewer than the {spec.ask.count} asked; all were taken"
            )
    return out


def blend_warnings(recipe: Recipe, written: int, by_category: Counter) -> list[str]:
    out = []
    if recipe.total is not None and written < recipe.total:
        out.append(
            f"the blend has {written} prompts, short of total {recipe.total}: "
            "every weighted source was used up"
        )
    limit = recipe.category_warn_share
    if limit is not None and written and len(by_category) > 1:
        for name, n in by_category.most_common(1):
            if n / written > limit:
                out.append(
                    f"category {name!r} is {n / written:.0%} of the blend "
                    f"(above {limit:.0%}); check the weights if that is not intended"
                )
    return out


def _shares(counts: Counter, total: int) -> dict[str, dict[str, float | int]]:
    return {
        name: {"count": n, "share": round(n / total, 4) if total else 0.0}
        for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    }
