"""Dedup by id and by content, against an earlier export and within this one."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import xxhash

from regen.jsonio import canonical

LABELS = ("id", "source", "category")  # not content: the same conversation under two ids is a dupe


def content_key(row: dict[str, Any]) -> int:
    return xxhash.xxh64_intdigest(canonical({k: v for k, v in row.items() if k not in LABELS}))


@dataclass
class Deduper:
    """Decides, for each new row, added / replaced / skipped; remembers what it has seen."""

    existing: dict[str, int] = field(default_factory=dict)  # id -> content key
    contents: set[int] = field(default_factory=set)
    seen_ids: set[str] = field(default_factory=set)
    replaced_ids: set[str] = field(default_factory=set)

    @classmethod
    def over(cls, rows: Iterable[dict[str, Any]]) -> Deduper:
        dedup = cls()
        for row in rows:
            key = content_key(row)
            dedup.existing[str(row["id"])] = key
            dedup.contents.add(key)
        return dedup

    def classify(self, row: dict[str, Any]) -> str:
        """One of: added, replaced, skipped_same (same id and content), skipped_duplicate_id,
        skipped_duplicate_content."""
        rid, key = str(row["id"]), content_key(row)
        if rid in self.seen_ids:
            return "skipped_duplicate_id"
        self.seen_ids.add(rid)
        if rid in self.existing:
            if self.existing[rid] == key:
                return "skipped_same"
            self.replaced_ids.add(rid)
            self.contents.add(key)
            return "replaced"
        if key in self.contents:
            return "skipped_duplicate_content"
        self.contents.add(key)
        return "added"
