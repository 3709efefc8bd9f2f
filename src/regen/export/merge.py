"""Dedup by (id, sample) and by content, against an earlier export and within this one."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xxhash

from regen.finished.record import SampleKey, is_ids
from regen.jsonio import canonical

# not content: the same conversation under two ids (or two samples of one id) is a dupe
LABELS = ("id", "sample", "prompt_id", "source", "category")


TOKEN_COLUMNS = ("input_ids", "loss_mask", "attention_mask")


def content_key(row: dict[str, Any]) -> int:
    """The hash of what a row says, whatever holds its token columns: a row read back from
    an export (lists) and the same row made now (int64 arrays) have one key. Those columns
    are hashed as int64 bytes (writing them out as JSON was a tenth of a row's export)."""
    digest = xxhash.xxh64()
    hashed = set()
    for name in TOKEN_COLUMNS:
        ids = _int64(row.get(name))
        if ids is not None:
            digest.update(f"{name}:{len(ids)}:".encode())
            digest.update(ids.tobytes())
            hashed.add(name)
    digest.update(canonical({k: v for k, v in row.items() if k not in LABELS and k not in hashed}))
    return digest.intdigest()


def _int64(value: Any) -> np.ndarray | None:
    """A non-empty list or array of integers as int64; None for anything else (hashed as
    JSON with the other fields: floats, booleans, numbers past int64, no value)."""
    if not is_ids(value) or not len(value):
        return None
    ids = np.asarray(value)  # a list is read in C; only a list of ints becomes int64
    return ids if ids.dtype == np.int64 and ids.ndim == 1 else None


@dataclass
class Deduper:
    """Decides, for each new row, added / replaced / skipped; remembers what it has seen.
    `key` names the (prompt id, sample) of a row: the format's own `Format.key`."""

    key: Callable[[dict[str, Any]], SampleKey]
    existing: dict[SampleKey, int] = field(default_factory=dict)  # (id, sample) -> content
    contents: set[int] = field(default_factory=set)
    seen: set[SampleKey] = field(default_factory=set)
    replaced: set[SampleKey] = field(default_factory=set)

    @classmethod
    def over(
        cls, rows: Iterable[dict[str, Any]], key: Callable[[dict[str, Any]], SampleKey]
    ) -> Deduper:
        dedup = cls(key)
        for row in rows:
            content = content_key(row)
            dedup.existing[key(row)] = content
            dedup.contents.add(content)
        return dedup

    def classify(self, row: dict[str, Any]) -> str:
        """One of: added, replaced, skipped_same (same id, sample and content),
        skipped_duplicate_id (the same id and sample twice), skipped_duplicate_content."""
        return self.classify_key(self.key(row), content_key(row))

    def classify_key(self, name: SampleKey, content: int) -> str:
        """The same, for a row whose (id, sample) and content key are already known."""
        if name in self.seen:
            return "skipped_duplicate_id"
        self.seen.add(name)
        if name in self.existing:
            if self.existing[name] == content:
                return "skipped_same"
            self.replaced.add(name)
            self.contents.add(content)
            return "replaced"
        if content in self.contents:
            return "skipped_duplicate_content"
        self.contents.add(content)
        return "added"
