"""Before and after: the rows of an earlier score and this one, paired by row id.

Both sides are pooled over the same rows, and the interval of the difference comes from the
paired rows (the delta method on each row's linearised contribution), so a drafter that is
better on the same rows shows it even when the spread between rows is wide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.finished.record import SampleKey, key_of
from regen.finished.score_rows import draft_rows_file, read_rows
from regen.score.accept import Z95
from regen.score.outcome import Outcome, from_line, steps_of, tokens_of


def parse_ks(spec: str) -> list[int]:
    """`3`, `1-8` or `2,4,8` -> sorted draft lengths."""
    try:
        ks: set[int] = set()
        for part in spec.split(","):
            lo, _, hi = part.strip().partition("-")
            ks.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        ks = set()
    if not ks or min(ks) < 1 or max(ks) > 32:
        raise ConfigError(f"--k {spec}: expected draft lengths 1..32 like 3, 1-8 or 2,4,8")
    return sorted(ks)


@dataclass
class Paired:
    """Sums over paired rows of (tokens before, steps before, tokens after, steps after) and
    their products: the difference's interval needs only these, so --all over 100K rows stays
    small. Each side's tokens are what its own verify steps emitted, so before and after are
    the tau the report shows (an n-gram draft makes no step where nothing matches)."""

    n: int = 0
    sums: list[float] = field(default_factory=lambda: [0.0] * 4)
    products: list[list[float]] = field(default_factory=lambda: [[0.0] * 4 for _ in range(4)])

    def add(self, before: tuple[float, float], after: tuple[float, float]) -> None:
        row = (*before, *after)
        self.n += 1
        for i in range(4):
            self.sums[i] += row[i]
            for j in range(4):
                self.products[i][j] += row[i] * row[j]

    def to_json(self) -> dict[str, Any]:
        n, (tb, b, ta, a) = self.n, self.sums
        if not (a and b):  # a side with no verify step (an n-gram that never matched)
            return {
                "rows": n,
                "before": None,
                "after": None,
                "difference": None,
                "ci95_half_width": None,
            }
        before, after = tb / b, ta / a
        # each row's share of (after - before), linearised: c . (tb, b, ta, a)
        c = (-n / b, before * n / b, n / a, -after * n / a)
        half = None
        if n > 1:
            var = sum(
                c[i] * c[j] * (self.products[i][j] - self.sums[i] * self.sums[j] / n)
                for i in range(4)
                for j in range(4)
            ) / (n - 1)
            half = round(Z95 * math.sqrt(max(var, 0.0) / n), 4)
        return {
            "rows": n,
            "before": round(before, 4),
            "after": round(after, 4),
            "difference": round(after - before, 4),
            "ci95_half_width": half,
        }


def baseline_rows(path: Path, name: str) -> tuple[str, dict[SampleKey, Outcome]]:
    """The outcomes of the earlier score's draft of this name (else its first draft)."""
    name, rows_file = draft_rows_file(path, name, "--baseline")
    rows = ((key_of(r), from_line(r)) for r in read_rows(rows_file))
    return name, {key: outcome for key, outcome in rows if outcome is not None}


def paired(
    rows_file: Path, before: dict[SampleKey, Outcome], by: str, ks: list[int]
) -> dict[str, Any]:
    groups: dict[str, dict[int, Paired]] = {}
    for line in read_rows(rows_file):
        old, new = before.get(key_of(line)), from_line(line)
        if old is None or new is None or tokens_of(old) != tokens_of(new):
            continue  # only rows scored on the same tokens on both sides pair up
        for name in (line["groups"].get(by, "(none)"), "(overall)"):
            per_k = groups.setdefault(name, {k: Paired() for k in ks})
            for k in ks:
                was, now = steps_of(old, k), steps_of(new, k)
                per_k[k].add((was.tokens, was.steps), (now.tokens, now.steps))
    return {g: {str(k): p.to_json() for k, p in per_k.items()} for g, per_k in groups.items()}
