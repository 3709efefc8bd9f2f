"""The sampled estimate of a drafter whose later proposals depend on its earlier ones (an
EAGLE-3 head's chain, a DFlash block): per answer position, the chain drafted from the verify
point there, and at each depth j the acceptance min(1, q_j(x)/p(x)) of the answer's token x at
that depth, with q_j the drafter's distribution at depth j (at the run's temperature, top-k
and top-p) and p the target's (outcome.py's `accept` has one q per position; here each depth
has its own).

Exact at depth 1, as for a draft model (the answer's token is a draw from p). At deeper ones
the drafter is read on the answer's own earlier tokens, as a draft model's next position is:
an accepted token follows min(p, q) rather than p, which this does not model.
"""

from __future__ import annotations

from dataclasses import dataclass

from regen.score.accept import RowSteps

ACCEPT_LEVELS = 90  # as outcome.py's `accept`: one printable character per figure
_LEVEL0 = 35


@dataclass(frozen=True)
class Chain:
    depth: int  # figures per position: the tokens the chain drafts (its longest k)
    levels: str  # position-major: depth characters per answer position

    def probabilities(self) -> list[list[float]]:
        top = ACCEPT_LEVELS - 1
        flat = [(ord(c) - _LEVEL0) / top for c in self.levels]
        return [flat[i : i + self.depth] for i in range(0, len(flat), self.depth)]

    def first_guesses(self) -> list[float]:
        return [at[0] for at in self.probabilities()]

    @property
    def tokens(self) -> int:
        return len(self.levels) // self.depth

    def steps(self, k: int) -> RowSteps:
        return chain_steps(self.probabilities(), min(k, self.depth))


def encode_chain(accept: list[list[float]], depth: int) -> Chain:
    top = ACCEPT_LEVELS - 1
    text = "".join(chr(_LEVEL0 + round(min(max(a, 0.0), 1.0) * top)) for at in accept for a in at)
    return Chain(depth, text)


def chain_steps(accept: list[list[float]], d: int) -> RowSteps:
    """Expected verify steps when each step drafts d tokens from the chain at its position
    and depth j is accepted with probability accept[pos][j] given the ones before were (the
    first answer token is the prefill's, as accept.py counts)."""
    n = len(accept)
    begins = [0.0] * (n + d + 2)
    if n > 1:
        begins[1] = 1.0
    steps = accepted = 0.0
    runs = [0.0] * (d + 1)
    for pos in range(1, n):
        chance = begins[pos]
        if chance == 0.0:
            continue
        steps += chance
        reach = chance  # the chance this step accepts at least j drafts
        for j in range(d + 1):
            a = accept[pos][j] if j < d else 0.0
            ends_here = reach * (1.0 - a)  # accepts exactly j
            runs[j] += ends_here
            accepted += ends_here * j
            begins[pos + j + 1] += ends_here
            reach -= ends_here
    return RowSteps(
        d,
        steps + accepted,
        steps=steps,
        drafted=steps * d,
        accepted=accepted,
        runs=tuple(runs),
        short=(),
    )
