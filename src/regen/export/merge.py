"""Dedup by (id, sample) and by content, against an earlier export and within this one."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import xxhash

from regen.check.record import SampleKey
from regen.jsonio import canonical

# not content: the same conversation under two ids (or two samples of one id) is a dupe
LABELS = ("id", "sample", "prompt_id", "source", "category")


def content_key(row: dict[str, Any]) -> int:
    return xxhash.xxh64_intdigest(canonical({k: v for k, v in row.items() if k not in LABELS}))


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
    def over(cls, rows: Iterable[dict[str, Any]],
             key: Callable[[dict[str, Any]], SampleKey]) -> Deduper:  # fmt: skip
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
