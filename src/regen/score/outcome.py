"""What a draft found on one row, in the three forms a row can take, and its verify steps at
any k (the rows file keeps the form; the report replays it at each k asked).

    match   "1"/"0" per answer token: the draft's one guess there, given the true prefix, is
            the answer's token. A draft that proposes one token deterministically (greedy, or
            an n-gram) is accepted exactly then, at any temperature: the run's own draw is the
            target's sample, and min(1, q(x)/p(x)) with q a point mass is that indicator.
    lookup  vLLM's n-gram drafter (ngram.py): per position, how many tokens a draft there holds
            (0: none, no verify step) and how many of them are right.
    accept  per position, min(1, q(x)/p(x)) for a draft that samples from q at the run's
            temperature (sampled.py): an unbiased estimate of the acceptance probability
            sum_x min(p(x), q(x)), kept in ACCEPT_LEVELS steps.
    chain   the same per position and depth, for a drafter whose q depends on its depth (an
            EAGLE-3 or DFlash head sampling at the run's temperature: chain.py).

Verify steps follow accept.py's conventions (the first answer token is the prefill's; a draft
past the answer's end counts as rejected; the bonus token counts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from regen.score.accept import RowSteps, chance_steps, simulate
from regen.score.chain import Chain

MAX_K = 32  # the longest draft `--k` takes
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"  # counts 0..MAX_K, one character each
ACCEPT_LEVELS = 90  # one printable character per token: 0..89 -> 0..1 in steps of 1/89
_LEVEL0 = 35  # "#": skips '"' (34) and keeps '\\' (92) out of the 90 characters 35..124


@dataclass(frozen=True)
class Lookup:
    room: str  # per answer position: tokens a draft there holds, 0..MAX_K
    right: str  # of those, how many from the first are the answer's own

    def steps(self, k: int) -> RowSteps:
        room, right = decode_counts(self.room), decode_counts(self.right)
        n, pos, steps, accepted, drafted, plain = len(room), 1, 0, 0, 0, 0
        runs, short = [0] * (k + 1), []
        while pos < n:
            d = min(k, room[pos])
            if d == 0:  # no match: a plain decode step, no draft counted
                pos, plain = pos + 1, plain + 1
                continue
            a = min(right[pos], d)
            runs[a] += 1
            steps, accepted, drafted = steps + 1, accepted + a, drafted + d
            if d < k:
                short.append(d)
            pos += a + 1
        return RowSteps(
            k,
            steps + accepted,
            steps=steps,
            drafted=drafted,
            accepted=accepted,
            runs=tuple(runs),
            short=tuple(short),
            answer=n,
            plain=plain,
        )

    def match(self) -> str:
        return "".join("1" if c != "0" else "0" for c in self.right)


@dataclass(frozen=True)
class Accept:
    levels: str  # per answer position, min(1, q/p) as a character (encode_accept)

    def probabilities(self) -> list[float]:
        return [(ord(c) - _LEVEL0) / (ACCEPT_LEVELS - 1) for c in self.levels]

    def steps(self, k: int) -> RowSteps:
        return expected_steps(self.probabilities(), k)


Outcome = str | Lookup | Accept | Chain


def steps_of(outcome: Outcome, k: int) -> RowSteps:
    return simulate(outcome, k) if isinstance(outcome, str) else outcome.steps(k)


def tokens_of(outcome: Outcome) -> int:
    if isinstance(outcome, Chain):
        return outcome.tokens
    return len(outcome if isinstance(outcome, str) else _first_field(outcome))


def hits_of(outcome: Outcome) -> float:
    """Answer tokens the draft's first guess gets (expected, for `accept`): top-1 agreement."""
    if isinstance(outcome, str):
        return outcome.count("1")
    if isinstance(outcome, Lookup):
        return outcome.match().count("1")
    if isinstance(outcome, Chain):
        return sum(outcome.first_guesses())
    return sum(outcome.probabilities())


def _first_field(outcome: Lookup | Accept) -> str:
    return outcome.room if isinstance(outcome, Lookup) else outcome.levels


def to_fields(outcome: Outcome) -> dict[str, Any]:
    if isinstance(outcome, str):
        return {"match": outcome}
    if isinstance(outcome, Lookup):
        return {"lookup": {"room": outcome.room, "right": outcome.right}}
    if isinstance(outcome, Chain):
        return {"chain": {"depth": outcome.depth, "levels": outcome.levels}}
    return {"accept": outcome.levels}


def from_line(line: dict[str, Any]) -> Outcome | None:
    """The outcome a rows-file line holds; None for a skipped row."""
    if "match" in line:
        return line["match"]
    if "lookup" in line:
        return Lookup(line["lookup"]["room"], line["lookup"]["right"])
    if "accept" in line:
        return Accept(line["accept"])
    if "chain" in line:
        return Chain(line["chain"]["depth"], line["chain"]["levels"])
    return None


def encode_counts(counts: list[int]) -> str:
    return "".join(_DIGITS[min(c, MAX_K)] for c in counts)


def decode_counts(text: str) -> list[int]:
    return [_DIGITS.index(c) for c in text]


def encode_accept(probabilities: list[float]) -> Accept:
    top = ACCEPT_LEVELS - 1
    return Accept("".join(chr(_LEVEL0 + round(min(max(a, 0.0), 1.0) * top)) for a in probabilities))


def expected_steps(accept: list[float], k: int) -> RowSteps:
    """Verify steps at draft length k when position i's draft is accepted with probability
    accept[i], given the earlier ones were (accept.chance_steps)."""
    n = len(accept)
    return chance_steps(n, k, lambda pos, j: accept[pos + j] if pos + j < n else 0.0)
