"""Counting: one `Group` per source plus one overall, fed one SampleResult at a time."""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from regen.check.sample import SampleResult

# Powers of two: a spike of 6-token masks and a long tail of 16K-token answers both show.
BIN_EDGES = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
TOP_PREFIXES = 10


@dataclass(frozen=True)
class StatOptions:
    degenerate_at: int = 10  # a mask sum at or below this is degenerate (the "6 tokens" case)
    min_run: int = 2  # DFlash anchors need this many consecutive supervised tokens
    max_length: int | None = None


def sample_flags(r: SampleResult, opts: StatOptions) -> tuple[str, ...]:
    """Every per-sample rule this sample breaks (the rules over the whole set are in Group)."""
    if r.error is not None:
        # an unusable sample is never counted as healthy
        return ("mask_errors", "degenerate", *r.flags, *(("empty_answer",) * r.answer_empty))
    checks = {
        "degenerate": r.degenerate,
        "empty_answer": r.answer_empty,
        "missing_reasoning": r.reasoning_missing,
        "truncated": r.finish_reason == "length",
        "too_long": opts.max_length is not None and r.n_tokens > opts.max_length,
        "short_runs": r.longest_run < opts.min_run,
        "token_mismatch": r.ids_match is False,
    }
    return (*(name for name, hit in checks.items() if hit), *r.flags)


@dataclass
class Group:
    opts: StatOptions
    samples: int = 0
    errors: Counter = field(default_factory=Counter)
    flags: Counter = field(default_factory=Counter)  # per-sample rule -> samples breaking it
    mask_sums: list[int] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    thinking_on: int = 0
    ids_checked: int = 0
    answers: Counter = field(default_factory=Counter)
    long_prefixes: Counter = field(default_factory=Counter)
    long_answers: Counter = field(default_factory=Counter)
    prefixes: Counter = field(default_factory=Counter)
    categories: Counter = field(default_factory=Counter)

    def add(self, r: SampleResult) -> None:
        self.samples += 1
        self.categories[r.category] += 1
        self.thinking_on += r.thinking == "on"
        self.flags.update(sample_flags(r, self.opts))
        if not r.answer_empty:
            self.answers[r.answer_hash] += 1
            self.prefixes[r.answer_prefix] += 1
        if r.prefix_hash is not None:
            self.long_prefixes[r.prefix_hash] += 1
            self.long_answers[r.answer_hash] += 1
        if r.error is not None:
            self.errors[r.error] += 1
            return
        self.mask_sums.append(r.mask_sum)
        self.output_tokens.append(r.output_tokens)
        self.ids_checked += r.ids_match is not None

    def count(self, flag: str) -> int:
        return self.flags[flag]

    @property
    def near_duplicates(self) -> int:
        """Long texts that share their opening with another one but are not exact copies."""
        shared = sum(self.long_prefixes.values()) - len(self.long_prefixes)
        exact = sum(self.long_answers.values()) - len(self.long_answers)
        return max(0, shared - exact)

    @property
    def duplicate_answers(self) -> int:
        return sum(self.answers.values()) - len(self.answers)

    def to_json(self) -> dict[str, Any]:
        o, f = self.opts, self.flags
        return {
            "samples": self.samples,
            "errors": dict(self.errors),
            "mask_sum": {
                **summary(self.mask_sums),
                "degenerate_at": o.degenerate_at,
                "at_or_below": sum(1 for m in self.mask_sums if m <= o.degenerate_at),
                "histogram": histogram(self.mask_sums),
            },
            "output_tokens": {
                **summary(self.output_tokens),
                "histogram": histogram(self.output_tokens),
            },
            "degenerate": f["degenerate"],
            "empty_answers": f["empty_answer"],
            "reasoning_missing": {"count": f["missing_reasoning"], "thinking_on": self.thinking_on},
            "truncated": f["truncated"],
            "too_long": {"max_length": o.max_length, "count": f["too_long"]},
            "short_runs": {"min_run": o.min_run, "count": f["short_runs"]},
            "duplicate_answers": {"count": self.duplicate_answers, "distinct": len(self.answers)},
            "near_duplicates": self.near_duplicates,
            "top_prefixes": [[p, n] for p, n in self.prefixes.most_common(TOP_PREFIXES) if n > 1],
            "token_ids": {"checked": self.ids_checked, "mismatched": f["token_mismatch"]},
            "flags": dict(f.most_common()),
            "categories": dict(self.categories.most_common()),
        }


def summary(values: list[int]) -> dict[str, float | int | None]:
    if not values:
        return {"min": None, "p50": None, "p90": None, "p99": None, "max": None, "mean": None}
    ordered = sorted(values)
    return {
        "min": ordered[0],
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "p99": percentile(ordered, 99),
        "max": ordered[-1],
        "mean": round(sum(ordered) / len(ordered), 1),
    }


def percentile(ordered: list[int], pct: float) -> int:
    """Nearest-rank percentile of a sorted list."""
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


def histogram(values: list[int]) -> dict[str, list[int]]:
    """Counts per [edge_i, edge_i+1) bin; the last bin is open-ended."""
    counts = [0] * len(BIN_EDGES)
    for v in values:
        counts[bisect_right(BIN_EDGES, v) - 1] += 1
    return {"edges": BIN_EDGES, "counts": counts}
