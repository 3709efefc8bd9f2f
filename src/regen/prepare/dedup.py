"""The prompt hash and an exact set of hashes that costs 8 bytes per distinct prompt.

The hash covers the whole prompt, every message and the tools, in canonical (key-sorted)
JSON. A key built from less (say the system prompt and first user turn) makes agent
trajectories that share an opening look like duplicates: that lost 57K of 58K samples once.
"""

from __future__ import annotations

import numpy as np
import xxhash

from regen.jsonio import canonical


def prompt_hash(messages: list[dict], tools: list[dict] | None) -> bytes:
    """16-byte xxh3-128 digest of the canonical prompt: the id and the dedup key."""
    return xxhash.xxh3_128_digest(canonical({"messages": messages, "tools": tools or None}))


def key64(digest: bytes) -> int:
    return int.from_bytes(digest[:8], "little")


class HashIndex:
    """Exact membership for 64-bit keys, kept as sorted numpy runs (LSM style).

    A Python set costs ~60 bytes a key; this costs 8, so a 2.3M-row source adds ~18 MB
    rather than ~140 MB. Keys arrive in batches; runs of similar size are merged so lookups
    touch O(log n) runs.
    """

    def __init__(self) -> None:
        self.runs: list[np.ndarray] = []
        self.size = 0

    def contains(self, keys: np.ndarray) -> np.ndarray:
        found = np.zeros(len(keys), dtype=bool)
        for run in self.runs:
            pos = np.minimum(np.searchsorted(run, keys), len(run) - 1)
            found |= run[pos] == keys
        return found

    def add(self, keys: np.ndarray) -> None:
        """Add keys that are not in the index yet (the caller checked)."""
        if not len(keys):
            return
        run = np.sort(keys)
        self.size += len(run)
        while self.runs and len(self.runs[-1]) <= 2 * len(run):
            run = np.sort(np.concatenate((self.runs.pop(), run)), kind="stable")
        self.runs.append(run)
