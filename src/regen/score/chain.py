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

from regen.score.accept import RowSteps, chance_steps

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
    and depth j is accepted with probability accept[pos][j] given the ones before were."""
    return chance_steps(len(accept), d, lambda pos, j: accept[pos][j])
