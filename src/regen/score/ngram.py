"""The model-free baseline: a prompt-lookup n-gram drafter (needs nothing but the tokens).

At each position it finds the latest earlier occurrence of the longest suffix of the context
(`max_n` tokens down to `min_n`) and guesses the token that followed it; with no occurrence it
guesses nothing (a miss). It guesses from the true prefix only, so chain drafting with it is
exactly its teacher-forced match vector, as for a model draft. This is the per-token form of
prompt-lookup decoding (llama.cpp `ngram-simple`, transformers `prompt_lookup_num_tokens`),
which copy a whole continuation instead; the two agree whenever the copied run stays right.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from regen.score.tokens import Sink, TokenRow


@dataclass(frozen=True)
class NgramDraft:
    max_n: int = 3
    min_n: int = 1
    name: str = "ngram"

    @property
    def identity(self) -> str:
        return f"ngram:{self.min_n}-{self.max_n}"

    @property
    def recipe(self) -> NgramDraft:
        """A worker's copy (score/spread.py): this draft holds nothing but its settings."""
        return self

    def open(self) -> NgramDraft:
        return self

    def matches(self, ids: Sequence[int], start: int) -> str:
        """The match vector over ids[start:]: for each, whether the guess from ids[:i] is it."""
        last: dict[tuple[int, ...], int] = {}  # n-gram -> index just after its latest end
        out = []
        for i in range(len(ids)):
            if i >= start:
                out.append("1" if self._guess(ids, i, last) == ids[i] else "0")
            # only now record the n-grams ending at i - 1: the guess above needed their
            # earlier occurrences, not these
            for n in range(self.min_n, min(self.max_n, i) + 1):
                last[tuple(ids[i - n : i])] = i
        return "".join(out)

    def _guess(self, ids: Sequence[int], i: int, last: dict[tuple[int, ...], int]) -> int | None:
        for n in range(min(self.max_n, i), self.min_n - 1, -1):
            after = last.get(tuple(ids[i - n : i]))
            if after is not None:
                return ids[after]
        return None

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        for row in rows:
            sink(row, self.matches(row.ids, row.start))

    def check(self, tok: Any) -> None:
        """Works on the target's own tokens: there is no vocabulary to differ."""

    def fits(self, row: TokenRow) -> bool:
        return True

    def close(self) -> None:
        """Holds nothing."""
