"""Sets of 64-bit keys in about 8.5 bytes each, for the ledger at tens of millions of items.

A Python set of ints costs ~70 bytes a key (the int object plus its hash slot), so a resume
over 10M finished items held ~2 GB. Here the keys are split by their top 4 bits into 16
stripes; each stripe is a sorted `array('Q')` with a bucket index on the next bits, and a
lookup is a C `bisect` over one bucket (a handful of keys). Stripes keep every change small:
keys added one at a time wait in a Python set and are merged into each stripe in one O(n)
pass when it passes `MERGE_AT`; bulk keys (a shard's sidecar) are appended unsorted and each
stripe is sorted in place (numpy, on the array's own buffer) before the next lookup. So no
step ever holds a second copy of more than one stripe.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable

import numpy as np

STRIPE_BITS = 4
STRIPES = 1 << STRIPE_BITS
TOP = 64 - STRIPE_BITS
MERGE_AT = 1 << 18  # keys held in the Python set before a merge (~18 MB)
PER_BUCKET = 8  # keys a bucket, on average: the index costs 0.5 byte a key


class _Stripe:
    __slots__ = ("keys", "mask", "prefix", "shift", "sorted", "starts")

    def __init__(self, index: int) -> None:
        self.prefix = np.uint64(index << TOP)  # the top bits every key of this stripe has
        self.keys = array("Q")
        self.sorted = True
        self.shift, self.mask = TOP - 1, 1
        self.starts = array("I", [0, 0, 0])

    def settle(self) -> int:
        """Sort appended keys in place and drop repeats; returns how many were dropped."""
        if self.sorted:
            return 0
        view = np.frombuffer(self.keys, dtype=np.uint64)
        view.sort()
        repeat = view[1:] == view[:-1]
        dropped = int(repeat.sum())
        kept = np.concatenate([view[:1], view[1:][~repeat]]) if dropped else None
        del view, repeat  # the array's buffer must not be exported when it is replaced
        if kept is not None:
            self.keys = array("Q", kept.tobytes())
        self._index()
        return dropped

    def insert(self, new: np.ndarray) -> int:
        """Merge sorted keys of this stripe in one pass; returns how many were known."""
        base = np.frombuffer(self.keys, dtype=np.uint64) if self.keys else np.empty(0, np.uint64)
        at = np.searchsorted(base, new)
        known = 0
        if len(base):
            hit = base[np.minimum(at, len(base) - 1)] == new
            known = int(hit.sum())
            new, at = new[~hit], at[~hit]
        merged = np.insert(base, at, new)
        del base
        self.keys = array("Q", merged.tobytes())
        self._index()
        return known

    def _index(self) -> None:
        bits = min(max(1, (len(self.keys) // PER_BUCKET).bit_length()), 24)
        self.shift, self.mask = TOP - bits, (1 << bits) - 1
        view = np.frombuffer(self.keys, dtype=np.uint64) if self.keys else np.empty(0, np.uint64)
        edges = (np.arange(1 << bits, dtype=np.uint64) << np.uint64(self.shift)) | self.prefix
        starts = np.empty((1 << bits) + 1, dtype=np.uint32)
        starts[:-1] = np.searchsorted(view, edges)
        starts[-1] = len(view)
        self.starts = array("I", starts.tobytes())
        self.sorted = True


class KeySet:
    def __init__(self, keys: Iterable[int] = ()) -> None:
        self._stripes = [_Stripe(i) for i in range(STRIPES)]
        self._pending: set[int] = set()
        self._unsettled = False
        self._lookup = [(s.keys, s.starts, s.shift, s.mask) for s in self._stripes]
        self._empty = True  # no key outside the pending set
        self.duplicates = 0  # keys added more than once (the ledger reports them)
        self.update(keys)

    def __len__(self) -> int:
        self._merge()
        return sum(len(s.keys) for s in self._stripes)

    def __contains__(self, key: int) -> bool:
        # The hot path of a resume (twice a prompt line): kept to local lookups on tuples.
        if self._unsettled:
            self._merge()
        if key in self._pending:
            return True
        if self._empty:  # errors/ is usually empty: its set is asked for every prompt too
            return False
        keys, starts, shift, mask = self._lookup[key >> TOP]
        bucket = (key >> shift) & mask
        end = starts[bucket + 1]
        at = bisect_left(keys, key, starts[bucket], end)
        return at < end and keys[at] == key

    def add_new(self, key: int) -> bool:
        """Add `key`; False (and nothing added) if it was already there. One call, not two:
        the input pass does this for every line."""
        if key in self._pending or (not self._empty and key in self):
            return False
        self._pending.add(key)
        if len(self._pending) >= MERGE_AT:
            self._merge()
        return True

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
        """Many keys at once (uint64), appended as they are; sorted before the next lookup."""
        keys = np.asarray(keys, dtype=np.uint64)
        if not len(keys):
            return
        top = (keys >> np.uint64(TOP)).astype(np.intp)
        for index in np.unique(top):
            stripe = self._stripes[index]
            stripe.keys.frombytes(keys[top == index].tobytes())
            stripe.sorted = False
        self._unsettled = True

    def _merge(self) -> None:
        if self._unsettled:
            self.duplicates += sum(s.settle() for s in self._stripes)
            self._unsettled = False
        if self._pending:
            new = np.fromiter(self._pending, dtype=np.uint64, count=len(self._pending))
            self._pending = set()
            new.sort()
            top = new >> np.uint64(TOP)
            bounds = np.searchsorted(top, np.arange(STRIPES + 1, dtype=np.uint64))
            for index in range(STRIPES):
                lo, hi = bounds[index], bounds[index + 1]
                if hi > lo:
                    self.duplicates += self._stripes[index].insert(new[lo:hi])
        self._lookup = [(s.keys, s.starts, s.shift, s.mask) for s in self._stripes]
        self._empty = not any(len(s.keys) for s in self._stripes)
