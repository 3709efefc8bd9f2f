"""Which rows are scored: every row, or N per group (seeded, stratified), of one side of the
held-out split or both, and their groups.

Sampling never holds the run: a first pass keeps, per group, the N rows with the smallest
seeded hash of their id (a heap of N ids per group), so the same seed picks the same rows
whatever the shard order, and a resumed score picks the rows it picked before.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from regen.errors import ConfigError, InputError
from regen.finished.holdout import ALL, SPLITS, HeldOut, Holdout, prompts_of
from regen.finished.read import Unreadable, parse_line, records
from regen.finished.record import Completion, SampleKey
from regen.storage import Store

GROUP_BY = ("category", "source", "turns", "length")
LENGTH_EDGES = (128, 512, 2048)  # answer tokens: short, medium, long, very long


def length_label(tokens: int | None) -> str:
    if tokens is None:
        return "(unknown)"
    lo = 0
    for edge in LENGTH_EDGES:
        if tokens < edge:
            return f"{lo}-{edge - 1}"
        lo = edge
    return f"{lo}+"


def answer_length(completion: Completion) -> int | None:
    """Answer tokens as the server counted them (the stored ids, else the usage field)."""
    ids = completion.completion_ids
    if ids is not None:
        return len(ids)
    usage = completion.raw.get("usage") or {}
    tokens = usage.get("completion_tokens")
    return tokens if isinstance(tokens, int) and tokens > 0 else None


def groups_of(completion: Completion) -> dict[str, str]:
    """Every grouping a report can ask for, so one scored row serves any `--by`."""
    turns = sum(1 for m in completion.messages if m.get("role") == "assistant")
    return {
        "category": completion.category,
        "source": completion.source,
        "turns": str(turns) if turns < 3 else "3+",
        "length": length_label(answer_length(completion)),
    }


def completions(
    lines: Iterable[bytes], on_bad: Callable[[dict, InputError], None]
) -> Iterator[Completion]:
    """The run's readable rows; each line that is not one goes to `on_bad` (counted)."""
    for line in lines:
        item = parse_line(line)
        if isinstance(item, Unreadable):
            on_bad(item.raw if isinstance(item.raw, dict) else {}, item.error)
        else:
            yield item


@dataclass(frozen=True)
class Selection:
    """`per_group` None: every row. Otherwise the ids chosen, per group value. With a
    `holdout`, only the rows of `split` (drawn by `pick` into `held`)."""

    by: str
    per_group: int | None
    seed: int
    chosen: frozenset[SampleKey] | None = None
    holdout: Holdout | None = None
    split: str = ALL
    held: HeldOut | None = None

    def __post_init__(self) -> None:
        if self.by not in GROUP_BY:
            raise ConfigError(f"--by must be one of {', '.join(GROUP_BY)}, not {self.by!r}")
        if self.per_group is not None and self.per_group < 1:
            raise ConfigError("--sample must be at least 1", hint="or pass --all")
        if self.split not in SPLITS:
            raise ConfigError(f"--split must be one of {', '.join(SPLITS)}, not {self.split!r}")
        if self.split != ALL and self.holdout is None:
            raise ConfigError(
                f"--split {self.split} needs the held-out fraction the export used",
                hint="pass --holdout F (and --holdout-seed S if the export set one)",
            )

    def wants(self, key: SampleKey) -> bool:
        in_split = self.held is None or self.held.wants(key[0], self.split)
        return in_split and (self.chosen is None or key in self.chosen)

    def split_json(self) -> dict[str, Any]:
        """What score --json says of the split: its side and how it was drawn."""
        return {"split": self.split, "holdout": self.held.to_json() if self.held else None}


def pick(store: Store, selection: Selection) -> Selection:
    """The first passes over the run: draw the held-out split when asked (over every prompt
    of the run, as export draws it), then choose the rows of its side."""
    if selection.holdout is not None and selection.held is None:
        held = selection.holdout.draw(prompts_of(records(store.iter_lines("completions"))))
        selection = replace(selection, held=held)
    return choose(completions(store.iter_lines("completions"), _ignore), selection)


def _ignore(raw: dict, err: InputError) -> None:
    """The first pass only picks rows; the scoring pass counts what cannot be read."""


def choose(items: Iterable[Completion], selection: Selection) -> Selection:
    """The first pass: pick `per_group` rows of each group; a no-op with --all."""
    if selection.per_group is None:
        return selection
    heaps: dict[str, list[tuple[int, SampleKey]]] = {}
    for completion in items:
        if selection.held is not None and not selection.held.wants(completion.id, selection.split):
            continue
        rank = -_rank(selection.seed, *completion.key)  # a max-heap of the smallest ranks
        heap = heaps.setdefault(groups_of(completion)[selection.by], [])
        if len(heap) < selection.per_group:
            heapq.heappush(heap, (rank, completion.key))
        elif rank > heap[0][0]:
            heapq.heapreplace(heap, (rank, completion.key))
    chosen = frozenset(key for heap in heaps.values() for _, key in heap)
    return replace(selection, chosen=chosen)


def _rank(seed: int, prompt_id: str, sample: int) -> int:
    # hashed as "ID#SAMPLE", the row name of earlier versions: a score they began resumes
    # on the rows they picked (an internal hash input, never shown)
    digest = hashlib.blake2b(f"{seed}\0{prompt_id}#{sample}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")
