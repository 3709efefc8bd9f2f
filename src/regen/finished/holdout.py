"""The held-out split: the prompts a drafter is not trained on, so that `score` can measure
it on rows it never saw.

`export --holdout F` and `score --holdout F` draw the split each on its own, from the same
facts only: the run's prompt ids with their categories, F and a seed. Nothing passes between
the two, so they agree on any machine, and the order the records come in (which a resume or
`--shard` changes) plays no part. The split is by prompt: every sample and turn of a prompt
lands on the same side.

It is stratified: each category holds out its share of F (largest remainders, so the total is
round(F x prompts) and a category of n prompts holds floor or ceil of F x n), and within a
category the prompts with the smallest seeded hash of their id are held out. That hash is
tagged, so it is independent of the hash of the same id that export's validation split
(`--val-fraction`) draws by: with both, validation takes its share of the prompts not held
out. An export of several runs draws each run's split (as `score RUN` does) and holds out
their union. The split is drawn over the prompts the run has answered: prompts answered later
(a run still going, or `--allow-changed-input`) can move prompts across it, so export and
score a finished run; the digest in the card and in `score --json` says whether two splits
are the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import xxhash

from regen.errors import ConfigError
from regen.records import NO_SOURCE

HOLDOUT, TRAIN, ALL = "holdout", "train", "all"
SPLITS = (HOLDOUT, TRAIN, ALL)
HASH_TAG = b"holdout\0"  # keeps this draw apart from every other hash of a prompt id


def prompts_of(records: Iterable[dict]) -> Iterator[tuple[str, str]]:
    """(prompt id, category) of every record that names a prompt; read from the raw record,
    so a record that export or score would refuse still counts: both see the same prompts."""
    for raw in records:
        if isinstance(raw, dict) and raw.get("id") is not None:
            yield str(raw["id"]), str(raw.get("category") or NO_SOURCE)


@dataclass(frozen=True)
class Holdout:
    """What the user asked: hold out `fraction` of the prompts, drawn with `seed`."""

    fraction: float
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.fraction < 1:
            raise ConfigError(
                f"--holdout {self.fraction} is not a fraction of the prompts",
                hint="give a number between 0 and 1, e.g. --holdout 0.05",
            )

    def draw(self, prompts: Iterable[tuple[str, str]]) -> HeldOut:
        """The held-out prompt ids among `prompts` ((id, category) pairs, repeats allowed)."""
        category: dict[str, str] = {}
        for prompt_id, cat in prompts:
            # one category a prompt, whatever order its samples come in
            category[prompt_id] = min(cat, category.get(prompt_id, cat))
        members: dict[str, list[str]] = {}
        for prompt_id, cat in category.items():
            members.setdefault(cat, []).append(prompt_id)
        quotas = self._quotas({cat: len(ids) for cat, ids in members.items()})
        held: set[str] = set()
        for cat, ids in members.items():
            held.update(sorted(ids, key=self._rank)[: quotas[cat]])
        counts = {cat: (len(ids), quotas[cat]) for cat, ids in sorted(members.items())}
        return HeldOut(frozenset(held), self, counts)

    def _rank(self, prompt_id: str) -> tuple[int, str]:
        # tagged: export's validation split hashes the bare id with its own seed (both 0 by
        # default), so an untagged hash held out the very prompts validation would take
        key = HASH_TAG + prompt_id.encode()
        return xxhash.xxh64_intdigest(key, seed=self.seed), prompt_id

    def _quotas(self, sizes: dict[str, int]) -> dict[str, int]:
        """Prompts held out per category: floor(F x n) each, and the rest of round(F x total)
        to the categories with the largest remainders (ties by a seeded hash of the name)."""
        share = Fraction(self.fraction).limit_denominator(10**9)
        exact = {cat: share * n for cat, n in sizes.items()}
        quotas = {cat: int(x) for cat, x in exact.items()}
        total = int(share * sum(sizes.values()) + Fraction(1, 2))
        order = sorted(exact, key=lambda c: (-(exact[c] - quotas[c]), self._rank(c)))
        for cat in order[: max(0, total - sum(quotas.values()))]:
            quotas[cat] += 1
        return quotas


@dataclass(frozen=True)
class HeldOut:
    """A drawn split: the held-out prompt ids, and per category (prompts, held out)."""

    ids: frozenset[str]
    holdout: Holdout
    counts: dict[str, tuple[int, int]]

    @classmethod
    def union(cls, parts: list[HeldOut]) -> HeldOut:
        """The split of an export of several runs: each run's own draw (what `score RUN`
        draws again), a prompt held out where any run holds it out, so the held-out rows
        `score` measures on one run are never rows the export put in `train`. Counts add up
        per run."""
        if len(parts) == 1:
            return parts[0]
        counts: dict[str, tuple[int, int]] = {}
        for part in parts:
            for cat, (n, k) in part.counts.items():
                had = counts.get(cat, (0, 0))
                counts[cat] = (had[0] + n, had[1] + k)
        ids = frozenset().union(*(part.ids for part in parts))
        return cls(ids, parts[0].holdout, dict(sorted(counts.items())))

    def unanswered(self, run: str, lines: int | None) -> str | None:
        """A warning when the run's prompt file holds more prompts than were drawn over (the
        run is not finished, or some prompts failed): answered later, they move the split."""
        drawn = sum(n for n, _ in self.counts.values())
        if lines is None or drawn >= lines:
            return None
        return (
            f"--holdout: {run} has answers to {drawn} of the {lines} prompts of its prompt file, "
            "and the split is drawn over those; once more are answered it changes, so export "
            "(and score) the finished run before training on it"
        )

    def split_of(self, prompt_id: str) -> str:
        return HOLDOUT if prompt_id in self.ids else TRAIN

    def wants(self, prompt_id: str, split: str) -> bool:
        return split == ALL or self.split_of(prompt_id) == split

    @property
    def digest(self) -> str:
        """A short fingerprint of the held-out ids: equal in the card and in `score --json`
        exactly when the two held out the same prompts."""
        h = xxhash.xxh64()
        for prompt_id in sorted(self.ids):
            h.update(prompt_id.encode() + b"\0")
        return h.hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {
            "fraction": self.holdout.fraction,
            "seed": self.holdout.seed,
            "prompts": sum(n for n, _ in self.counts.values()),
            "held_out_prompts": len(self.ids),
            "by_category": {c: {"prompts": n, "held_out": k} for c, (n, k) in self.counts.items()},
            "digest": self.digest,
        }
