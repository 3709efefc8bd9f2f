"""vLLM's n-gram drafter (prompt lookup), so that `score --draft ngram` scores the drafter a
vLLM fleet speculates with, step by step as vLLM runs it.

vLLM 0.32 (v1/spec_decode/ngram_proposer.py, `_find_longest_matched_ngram_and_propose_tokens`):
before each decode step the context is the prompt and the answer so far; the longest suffix
of it, of prompt_lookup_min..prompt_lookup_max tokens, that occurred earlier in the context is
found (its earliest occurrence, overlaps allowed), and the k tokens that followed it are
drafted, fewer when the context ends sooner. With no such suffix nothing is drafted: the step
is a plain decode, and vLLM counts no draft for it. Settings (config/speculative.py): both
unset means 5 and 5; one unset takes the other's value.

Where the draft starts depends only on the true prefix (an accepted draft is the answer's own
tokens), so one pass over a row gives, per answer position, how many tokens a draft there
could hold and how many of them are right; any k is replayed from those (outcome.Lookup).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.score.outcome import MAX_K, Lookup, encode_counts
from regen.score.tokens import Sink, TokenRow

VLLM_DEFAULT = 5  # prompt_lookup_min and _max when the speculative config sets neither


@dataclass(frozen=True)
class NgramSettings:
    min_n: int
    max_n: int
    source: str  # where they came from, for the report

    def __post_init__(self) -> None:
        if not 1 <= self.min_n <= self.max_n:
            raise ConfigError(
                f"n-gram lookup {self.min_n}-{self.max_n}: expected 1 <= MIN <= MAX",
                hint="pass --ngram-lookup MIN-MAX like 1-3 (vLLM's prompt_lookup_min/max)",
            )


def parse_lookup(text: str) -> NgramSettings:
    """`--ngram-lookup 2-4` (or `3`: both)."""
    lo, _, hi = text.partition("-")
    try:
        return NgramSettings(int(lo), int(hi or lo), "--ngram-lookup")
    except ValueError:
        raise ConfigError(
            f"--ngram-lookup {text}: expected MIN-MAX like 1-3",
            hint="the shortest and longest n-gram to look up (vLLM's prompt_lookup_min/max)",
        ) from None


def from_speculative_config(config: Any) -> NgramSettings | None:
    """The settings of a vLLM `--speculative-config` whose method is ngram, with vLLM's own
    defaulting; None for another method or none."""
    if not isinstance(config, dict) or config.get("method") != "ngram":
        return None
    lo, hi = config.get("prompt_lookup_min"), config.get("prompt_lookup_max")
    if lo is None and hi is None:
        lo = hi = VLLM_DEFAULT
    lo, hi = (hi if lo is None else lo), (lo if hi is None else hi)
    return NgramSettings(int(lo), int(hi), "the fleet's --speculative-config")


DEFAULTS = NgramSettings(VLLM_DEFAULT, VLLM_DEFAULT, "vLLM's defaults")


def ngram_settings(run: str | Path, lookup: str | None) -> NgramSettings:
    """--ngram-lookup, else what the run's fleet served with (generate keeps `regen serve`'s
    --speculative-config in the manifest), else vLLM's defaults."""
    if lookup:
        return parse_lookup(lookup)
    from regen.storage import open_store

    manifest = open_store(run).read_manifest() or {}
    served = from_speculative_config((manifest.get("config") or {}).get("speculative_config"))
    return served or DEFAULTS


@dataclass(frozen=True)
class NgramDraft:
    settings: NgramSettings = DEFAULTS
    name: str = "ngram"

    @property
    def identity(self) -> str:
        return f"vllm-ngram:{self.settings.min_n}-{self.settings.max_n}"

    @property
    def recipe(self) -> NgramDraft:
        """A worker's copy (score/spread.py): this draft holds nothing but its settings."""
        return self

    def open(self) -> NgramDraft:
        return self

    def lookup(self, ids: Sequence[int], start: int) -> Lookup:
        """Per answer position p (ids[start:]): the tokens a draft there can hold (0: no
        match, no draft) and how many of them, from the first, are the answer's own."""
        starts = draft_starts(ids, start, self.settings.min_n, self.settings.max_n)
        room, right = [0], [0]  # the first answer token comes from the prefill
        for p in range(start + 1, len(ids)):
            at = starts[p - start]
            if at is None:
                room.append(0)
                right.append(0)
                continue
            room.append(min(p - at, MAX_K))
            n = 0
            while n < room[-1] and p + n < len(ids) and ids[at + n] == ids[p + n]:
                n += 1
            right.append(n)
        return Lookup(encode_counts(room), encode_counts(right))

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        for row in rows:
            sink(row, self.lookup(row.ids, row.start))

    def check(self, tok: Any) -> None:
        """Works on the target's own tokens: there is no vocabulary to differ."""

    def fits(self, row: TokenRow) -> bool:
        return True

    def close(self) -> None:
        """Holds nothing."""


def draft_starts(ids: Sequence[int], start: int, min_n: int, max_n: int) -> list[int | None]:
    """For each p in start..len(ids)-1: where in ids[:p] vLLM's draft would begin (right after
    the earliest earlier occurrence of the longest matching suffix), or None."""
    earliest: dict[tuple[int, ...], int] = {}  # n-gram -> index just after its first end
    out: list[int | None] = []
    for p in range(len(ids)):
        if p >= start:
            out.append(_lookup(ids, p, min_n, max_n, earliest))
        # the n-grams ending at p (the suffix of ids[:p + 1]) become "earlier" from p + 1 on
        for n in range(min_n, min(max_n, p + 1) + 1):
            earliest.setdefault(tuple(ids[p + 1 - n : p + 1]), p + 1)
    return out


def _lookup(
    ids: Sequence[int], p: int, min_n: int, max_n: int, earliest: dict[tuple[int, ...], int]
) -> int | None:
    for n in range(min(max_n, p), min_n - 1, -1):
        after = earliest.get(tuple(ids[p - n : p]))
        if after is not None and after < p:
            return after
    return None
