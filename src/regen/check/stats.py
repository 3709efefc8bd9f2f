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


@dataclass
class Group:
    opts: StatOptions
    samples: int = 0
    errors: Counter = field(default_factory=Counter)
    mask_sums: list[int] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    degenerate: int = 0
    empty_answers: int = 0
    thinking_on: int = 0
    reasoning_missing: int = 0
    truncated: int = 0
    too_long: int = 0
    short_runs: int = 0
    ids_checked: int = 0
    ids_mismatched: int = 0
    answers: Counter = field(default_factory=Counter)
    prefixes: Counter = field(default_factory=Counter)
    categories: Counter = field(default_factory=Counter)

    def add(self, r: SampleResult) -> None:
        self.samples += 1
        self.categories[r.category] += 1
        self.empty_answers += r.answer_empty
        self.thinking_on += r.thinking == "on"
        self.reasoning_missing += r.reasoning_missing
        self.truncated += r.finish_reason == "length"
        if not r.answer_empty:
            self.answers[r.answer_hash] += 1
            self.prefixes[r.answer_prefix] += 1
        if r.error is not None:
            self.errors[r.error] += 1
            self.degenerate += 1  # an unusable sample is never counted as healthy
            return
        self.mask_sums.append(r.mask_sum)
        self.output_tokens.append(r.output_tokens)
        self.degenerate += r.mask_sum <= self.opts.degenerate_at or r.answer_empty
        self.short_runs += r.longest_run < self.opts.min_run
        self.too_long += self.opts.max_length is not None and r.n_tokens > self.opts.max_length
        if r.ids_match is not None:
            self.ids_checked += 1
            self.ids_mismatched += not r.ids_match

    @property
    def duplicate_answers(self) -> int:
        return sum(self.answers.values()) - len(self.answers)

    def to_json(self) -> dict[str, Any]:
        o = self.opts
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
            "degenerate": self.degenerate,
            "empty_answers": self.empty_answers,
            "reasoning_missing": {"count": self.reasoning_missing, "thinking_on": self.thinking_on},
            "truncated": self.truncated,
            "too_long": {"max_length": o.max_length, "count": self.too_long},
            "short_runs": {"min_run": o.min_run, "count": self.short_runs},
            "duplicate_answers": {"count": self.duplicate_answers, "distinct": len(self.answers)},
            "top_prefixes": [[p, n] for p, n in self.prefixes.most_common(TOP_PREFIXES) if n > 1],
            "token_ids": {"checked": self.ids_checked, "mismatched": self.ids_mismatched},
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
