"""The acceptance figures of one group of rows: each row's outcome (outcome.py) folded with
accept.py's maths, for k = 1..k_max."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from regen.score.accept import AtK, Ratio, RowSteps
from regen.score.outcome import Outcome, hits_of, steps_of, tokens_of


@dataclass
class Tally:
    """All the acceptance figures of one group of rows, for k = 1..k_max; O(k_max^2) memory."""

    k_max: int
    rows: int = 0
    tokens: int = 0  # answer tokens
    match: Ratio = field(default_factory=Ratio)  # top-1 agreement over all answer tokens
    by_k: list[AtK] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.by_k = self.by_k or [AtK(k) for k in range(1, self.k_max + 1)]

    def add(self, outcome: Outcome) -> None:
        n = tokens_of(outcome)
        if not n:
            return
        self.rows += 1
        self.tokens += n
        self.match.add(hits_of(outcome), n)
        for at in self.by_k:
            at.add(steps_of(outcome, at.k))

    def add_steps(self, row: RowSteps, answer_tokens: int) -> None:
        """A row whose verify steps the engine reported (no match vector: no top-1). Every
        forward emits one token besides the drafts it accepts: the rest of the answer's
        tokens were decoded without a draft."""
        self.rows += 1
        self.tokens += answer_tokens
        plain = max(0.0, answer_tokens - 1 - row.steps - row.accepted)
        self.by_k[row.k - 1].add(replace(row, answer=answer_tokens, plain=plain))

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "tokens": self.tokens,
            "top1_match": self.match.to_json(),
            "by_k": [at.to_json() for at in self.by_k],
        }
