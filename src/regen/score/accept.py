"""Acceptance maths on match vectors: what a greedy chain drafter of length k would get.

A match vector says, for every answer token, whether the draft's greedy guess given the true
prefix equals the target's token ("1") or not ("0"). Under greedy verification a drafted
token is accepted only if every earlier one in its step was, so the draft always sees the
true prefix and one teacher-forced pass gives the exact outcome of speculative decoding.

Steps are counted the way vLLM counts them (vLLM 0.32.0: v1/core/sched/scheduler.py:2110-2149
and 855-872, v1/metrics/stats.py:388-409), so that tau is the engine's mean acceptance length:

    the first answer token comes from the prefill, not from a verify step;
    every verify step drafts k tokens, also near the end of the answer (vLLM does not shorten
    the last drafts; what they would accept past the answer's end is not in the answer, and
    is counted as rejected here); the first mismatch ends the step, and the target emits
    the accepted tokens plus its own next one (the bonus, counted even past the end).

tau(k) = 1 + accepted / verify steps, pooled over rows; the acceptance rate is accepted /
drafted (k per step). An identity draft gets k + 1 on every full step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Z95 = 1.959964  # two-sided 95% normal quantile


@dataclass(frozen=True)
class RowSteps:
    """One row's verify steps at draft length k (counts; expected counts, as floats, for a
    draft that samples: outcome.expected_steps)."""

    k: int
    tokens: float  # emitted by the verify steps: accepted drafts plus one bonus each
    steps: float
    drafted: float
    accepted: float
    runs: tuple[float, ...]  # steps by accepted tokens, index 0..k
    short: tuple[int, ...]  # tokens drafted by each step that drafted fewer than k
    answer: int = 0  # the answer's tokens
    plain: float = 0.0  # positions decoded one token a forward: no draft there (n-gram)

    @property
    def tau(self) -> float:
        """vLLM's mean acceptance length: 1.0 for an answer with no verify step."""
        return self.tokens / self.steps if self.steps else 1.0

    @property
    def forwards(self) -> float:
        """The target's forward passes over the whole answer: the prefill (its first token),
        each verify step and each position decoded without a draft. answer / forwards is
        what speculation saves: 1.0 without it, k + 1 at most; unlike tau, it counts the
        positions a draft had nothing to propose for (an n-gram's nine steps in 200 tokens)."""
        return 1 + self.steps + self.plain


def simulate(matches: str, k: int) -> RowSteps:
    """Replay greedy chain drafting of length `k` over a match vector ("1" = draft right)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    n, pos, steps, accepted = len(matches), 1, 0, 0  # position 0: the prefill's token
    runs = [0] * (k + 1)
    while pos < n:
        window = matches[pos : pos + k]  # shorter only past the end: those count as misses
        miss = window.find("0")
        a = len(window) if miss < 0 else miss
        runs[a] += 1
        steps, accepted = steps + 1, accepted + a
        pos += a + 1
    return RowSteps(
        k,
        steps + accepted,
        steps=steps,
        drafted=steps * k,
        accepted=accepted,
        runs=tuple(runs),
        short=(),
        answer=n,
    )


def chance_steps(n: int, k: int, chance: Callable[[int, int], float]) -> RowSteps:
    """Expected verify steps over an answer of n tokens at draft length k, when the step that
    begins at position pos has its j-th draft accepted with probability chance(pos, j) given
    the earlier ones were (a sampling draft's min(1, p/q), a head's chain per depth): the
    chance that a step begins at each position is carried forward, so every figure is an
    expectation (fractional), exact for 0/1 inputs. The first answer token is the prefill's."""
    begins = [0.0] * (n + k + 2)
    if n > 1:
        begins[1] = 1.0
    steps = accepted = 0.0
    runs = [0.0] * (k + 1)
    for pos in range(1, n):
        if begins[pos] == 0.0:
            continue
        steps += begins[pos]
        reach = begins[pos]  # the chance this step accepts at least j drafts
        for j in range(k + 1):
            ends_here = reach * (1.0 - (chance(pos, j) if j < k else 0.0))  # accepts exactly j
            runs[j] += ends_here
            accepted += ends_here * j
            begins[pos + j + 1] += ends_here
            reach -= ends_here
    return RowSteps(
        k,
        steps + accepted,
        steps=steps,
        drafted=steps * k,
        accepted=accepted,
        runs=tuple(runs),
        short=(),
        answer=n,
    )


@dataclass
class Ratio:
    """A pooled ratio sum(x) / sum(y) over rows, with a 95% interval from the spread between
    rows (the delta method for a ratio estimator: rows are the sampling unit, not tokens)."""

    n: int = 0
    x: float = 0.0
    y: float = 0.0
    xx: float = 0.0
    yy: float = 0.0
    xy: float = 0.0

    def add(self, x: float, y: float) -> None:
        self.n += 1
        self.x, self.y = self.x + x, self.y + y
        self.xx, self.yy, self.xy = self.xx + x * x, self.yy + y * y, self.xy + x * y

    @property
    def value(self) -> float | None:
        return self.x / self.y if self.y else None

    @property
    def half_width(self) -> float | None:
        """Half the 95% interval; None with fewer than two rows."""
        r = self.value
        if r is None or self.n < 2:
            return None
        spread = max(self.xx - 2 * r * self.xy + r * r * self.yy, 0.0) / (self.n - 1)
        return Z95 * math.sqrt(spread / self.n) / (self.y / self.n)

    def to_json(self) -> dict[str, Any]:
        value, half = self.value, self.half_width
        return {
            "value": None if value is None else round(value, 4),
            "ci95": None if half is None else [round(value - half, 4), round(value + half, 4)],
        }


@dataclass
class AtK:
    """Every row's steps at one k, pooled."""

    k: int
    tau: Ratio = field(default_factory=Ratio)
    rate: Ratio = field(default_factory=Ratio)
    per_forward: Ratio = field(default_factory=Ratio)  # answer tokens per target forward
    steps: int = 0
    runs: list[int] = field(default_factory=list)
    drafted_at: list[int] = field(default_factory=list)  # steps that drafted position i
    accepted_at: list[int] = field(default_factory=list)  # steps that accepted position i

    def __post_init__(self) -> None:
        self.runs = self.runs or [0] * (self.k + 1)
        self.drafted_at = self.drafted_at or [0] * self.k
        self.accepted_at = self.accepted_at or [0] * self.k

    def add(self, row: RowSteps) -> None:
        self.tau.add(row.tokens, row.steps)
        if row.answer:
            self.per_forward.add(row.answer, row.forwards)
        if row.drafted:
            self.rate.add(row.accepted, row.drafted)
        self.steps += row.steps
        reached = row.steps  # steps whose run got past position i (accepted i+1 or more)
        for i in range(self.k):
            self.runs[i] += row.runs[i]
            reached -= row.runs[i]
            self.accepted_at[i] += reached
            # every step drafts k positions, except short ones (an engine's n-gram drafter)
            self.drafted_at[i] += row.steps - sum(1 for d in row.short if d <= i)
        self.runs[self.k] += row.runs[self.k]

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "tau": self.tau.to_json(),
            "acceptance_rate": self.rate.to_json(),
            "tokens_per_forward": self.per_forward.to_json(),
            "verify_steps": _whole(self.steps),
            "per_position": [
                round(a / d, 4) if d else None
                for a, d in zip(self.accepted_at, self.drafted_at, strict=True)
            ],
            "accepted_runs": [_whole(r) for r in self.runs],
        }


def _whole(value: float) -> float:
    """A count, or an expected count (sampled acceptance) to two decimals."""
    return value if isinstance(value, int) else round(value, 2)
