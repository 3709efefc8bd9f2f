"""The ledger's compact key set behaves exactly like a Python set, at every merge path."""

from __future__ import annotations

import random

import numpy as np

from regen.run import keyset
from regen.run.keyset import KeySet


def test_matches_a_python_set_across_merges(monkeypatch):
    monkeypatch.setattr(keyset, "MERGE_AT", 50)  # many small merges
    rng = random.Random(5)
    model: set[int] = set()
    ks = KeySet()
    bulk = [rng.getrandbits(64) for _ in range(5000)]
    ks.add_array(np.array(bulk, dtype=np.uint64))
    model.update(bulk)
    for step in range(3000):
        key = rng.choice(bulk) if step % 7 == 0 else rng.getrandbits(64)
        assert (key in ks) == (key in model)
        if step % 3 == 0:
            ks.add(key)
            model.add(key)
    for edge in (0, 2**64 - 1, 1 << 44, (1 << 44) - 1):
        assert (edge in ks) == (edge in model)
        ks.add(edge)
        model.add(edge)
        assert edge in ks
    assert len(ks) == len(model)


def test_repeats_are_counted_not_kept():
    ks = KeySet([1, 2, 3])
    ks.add(2)  # a repeat of a key still pending
    ks.add_array(np.array([3, 4, 4], dtype=np.uint64))
    assert len(ks) == 4
    assert ks.duplicates == 3
    ks.add(4)
    assert len(ks) == 4 and ks.duplicates == 4


def test_add_new_says_whether_the_key_was_there(monkeypatch):
    monkeypatch.setattr(keyset, "MERGE_AT", 3)
    ks = KeySet()
    assert [ks.add_new(k) for k in (5, 6, 5, 7, 8, 6, 9)] == [
        True,
        True,
        False,
        True,
        True,
        False,
        True,
    ]
    assert len(ks) == 5 and ks.duplicates == 0
