"""The blend: which unique prompts of each source end up in the file.

Every prompt gets a rank, a seeded hash of its prompt hash, so the choice does not depend
on row order and duplicates share a rank. A source keeps only its `limit` best-ranked
prompts (a bounded heap), so memory follows the blend, not the source: sampling 50K from
2.3M rows holds 50K lines. Quotas are decided once every source is counted: fixed counts
and `all` first, then weights share the rest, small sources taken whole ("water-filling").
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import xxhash


def rank(digest: bytes, seed: int) -> int:
    return xxhash.xxh3_64_intdigest(digest, seed=seed)


@dataclass(frozen=True, slots=True)
class Candidate:
    rank: int
    row: int
    category: str
    line: bytes


class Candidates:
    """The `limit` lowest-ranked candidates seen (all of them when limit is None)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.heap: list[tuple[int, int, Candidate]] = []  # (-rank, -row): max-heap on rank

    def would_keep(self, rank: int, row: int) -> bool:
        """Could a candidate of this rank still enter? The bar only rises, so a "no" now is a
        "no" later: such a prompt needs no line, category or meta at all."""
        return self.limit is None or len(self.heap) < self.limit or (-rank, -row) > self.heap[0][:2]

    def offer(self, candidate: Candidate) -> None:
        item = (-candidate.rank, -candidate.row, candidate)
        if self.limit is None or len(self.heap) < self.limit:
            heapq.heappush(self.heap, item)
        elif item > self.heap[0]:
            heapq.heapreplace(self.heap, item)

    def best(self, n: int) -> list[Candidate]:
        ordered = sorted((c for _, _, c in self.heap), key=lambda c: (c.rank, c.row))
        return ordered[:n]


@dataclass(frozen=True)
class Ask:
    """What the recipe asks of one source: a fixed count, all of it, or a weight."""

    count: int | None = None
    take_all: bool = False
    weight: float | None = None


def allocate(asks: list[Ask], available: list[int], total: int | None) -> list[int]:
    """Quota per source. Fixed asks are capped by what exists; weights fill up to `total`."""
    quotas = [0] * len(asks)
    for i, ask in enumerate(asks):
        if ask.take_all:
            quotas[i] = available[i]
        elif ask.count is not None:
            quotas[i] = min(ask.count, available[i])
    weighted = [i for i, ask in enumerate(asks) if ask.weight is not None]
    if not weighted or total is None:
        return quotas
    remaining = max(0, total - sum(quotas))
    while weighted:  # sources too small for their share are taken whole; repeat until stable
        wsum = sum(asks[i].weight for i in weighted)
        small = [i for i in weighted if available[i] <= remaining * asks[i].weight / wsum]
        if not small:
            break
        for i in small:
            quotas[i] = available[i]
            remaining -= available[i]
            weighted.remove(i)
    if weighted:
        _split(quotas, weighted, [asks[i].weight for i in weighted], remaining)
    return quotas


def _split(quotas: list[int], idx: list[int], weights: list[float], remaining: int) -> None:
    """Largest-remainder rounding: integer shares that add up to `remaining` exactly."""
    wsum = sum(weights)
    shares = [remaining * w / wsum for w in weights]
    floors = [math.floor(s) for s in shares]
    order = sorted(range(len(idx)), key=lambda k: (-(shares[k] - floors[k]), k))
    for k in order[: remaining - sum(floors)]:
        floors[k] += 1
    for k, i in enumerate(idx):
        quotas[i] = floors[k]


def heap_limit(ask: Ask, fixed_total: int, total: int | None) -> int | None:
    """How many candidates a source must keep so any later quota can still be met."""
    if ask.take_all:
        return None
    if ask.count is not None:
        return ask.count
    return max(0, (total or 0) - fixed_total)
