"""Sets of 64-bit keys in about 8.5 bytes each, for the ledger at tens of millions of items.

A Python set of ints costs ~70 bytes a key (the int object plus its hash slot), so a resume
over 10M finished items held ~2 GB. Here the keys live in one sorted `array('Q')` (numpy
views it without a copy to merge) with a bucket index on their top bits; a lookup is a C
`bisect` over one bucket, a handful of keys. Keys added one at a time wait in a small Python
set and are merged in (O(n), no re-sort) when it passes `MERGE_AT`; bulk keys (a shard's
sidecar) are kept as arrays and merged, with one sort, before the next lookup.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable

import numpy as np

MERGE_AT = 1 << 18  # keys held in the Python set before a merge (~18 MB)
PER_BUCKET = 8  # keys a bucket, on average: the index costs 0.5 byte a key


class KeySet:
    def __init__(self, keys: Iterable[int] = ()) -> None:
        self._keys = array("Q")
        self._starts = array("I", [0, 0, 0])
        self._shift = 63  # bucket = key >> shift: two buckets while empty
        self._pending: set[int] = set()
        self._chunks: list[np.ndarray] = []
        self.duplicates = 0  # keys added more than once (the ledger reports them)
        self.update(keys)

    def __len__(self) -> int:
        self._merge()
        return len(self._keys)

    def __contains__(self, key: int) -> bool:
        if self._chunks:
            self._merge()
        if key in self._pending:
            return True
        keys, starts, bucket = self._keys, self._starts, key >> self._shift
        end = starts[bucket + 1]
        at = bisect_left(keys, key, starts[bucket], end)
        return at < end and keys[at] == key

    def add(self, key: int) -> None:
        if key in self._pending:
            self.duplicates += 1
        self._pending.add(key)
        if len(self._pending) >= MERGE_AT:
            self._merge()

    def update(self, keys: Iterable[int]) -> None:
        for key in keys:
            self.add(key)

    def add_array(self, keys: np.ndarray) -> None:
        """Many keys at once (uint64); merged before the next lookup."""
        if len(keys):
            self._chunks.append(np.asarray(keys, dtype=np.uint64))

    def _merge(self) -> None:
        if self._chunks:
            self._merge_chunks()
        if self._pending:
            new = np.fromiter(self._pending, dtype=np.uint64, count=len(self._pending))
            self._pending = set()
            new.sort()
            self._insert_sorted(new)

    def _merge_chunks(self) -> None:
        parts, self._chunks = [self._array(), *self._chunks], []
        self._set(np.empty(0, dtype=np.uint64))  # let the old array go first
        merged = np.concatenate(parts)
        del parts
        merged.sort()  # in place: no second copy of the keys
        if len(merged) > 1:
            fresh = np.empty(len(merged), dtype=bool)
            fresh[0] = True
            np.not_equal(merged[1:], merged[:-1], out=fresh[1:])
            if not fresh.all():
                self.duplicates += int(len(fresh) - fresh.sum())
                merged = merged[fresh]
        self._set(merged)

    def _insert_sorted(self, new: np.ndarray) -> None:
        """Merge a small sorted array into the big one in one pass."""
        base = self._array()
        at = np.searchsorted(base, new)
        if len(base):
            known = base[np.minimum(at, len(base) - 1)] == new
            if known.any():
                self.duplicates += int(known.sum())
                new, at = new[~known], at[~known]
        merged = np.insert(base, at, new)
        del base
        self._set(merged)

    def _array(self) -> np.ndarray:
        return np.frombuffer(self._keys, dtype=np.uint64) if self._keys else np.empty(0, np.uint64)

    def _set(self, keys: np.ndarray) -> None:
        bits = min(max(1, (len(keys) // PER_BUCKET).bit_length()), 28)
        self._shift = 64 - bits
        edges = np.arange(1 << bits, dtype=np.uint64) << np.uint64(self._shift)
        starts = np.empty((1 << bits) + 1, dtype=np.uint32)
        starts[:-1] = np.searchsorted(keys, edges)
        starts[-1] = len(keys)
        self._keys, self._starts = array("Q"), array("I")
        if len(keys):
            self._keys.frombytes(memoryview(keys).cast("B"))
        self._starts.frombytes(memoryview(starts).cast("B"))
