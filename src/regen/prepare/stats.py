"""Per-source counters. Every row read ends in exactly one bucket:

read = converted + rejected + skipped
converted = deduplicated + unique
unique = selected + not selected (by the blend)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class SourceStats:
    name: str
    dataset: str
    format: str = ""
    format_reason: str = ""
    read: int = 0
    converted: int = 0
    rejected: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    deduplicated: int = 0
    duplicate_of: Counter = field(default_factory=Counter)  # source name → count
    unique: int = 0
    requested: int = 0
    selected: int = 0
    dropped_blocks: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)  # reject kind → first message
    other_formats: Counter = field(default_factory=Counter)  # auto: rows of another shape

    @property
    def dedup_rate(self) -> float:
        return self.deduplicated / self.converted if self.converted else 0.0

    @property
    def reject_rate(self) -> float:
        failed = sum(self.rejected.values())
        return failed / self.read if self.read else 0.0

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "dataset": self.dataset,
            "format": self.format,
            "format_reason": self.format_reason,
            "read": self.read,
            "converted": self.converted,
            "rejected": dict(sorted(self.rejected.items())),
            "skipped": dict(sorted(self.skipped.items())),
            "deduplicated": self.deduplicated,
            "duplicate_of": dict(sorted(self.duplicate_of.items())),
            "dedup_rate": round(self.dedup_rate, 4),
            "unique": self.unique,
            "requested": self.requested,
            "selected": self.selected,
            "not_selected": self.unique - self.selected,
            "dropped_blocks": dict(sorted(self.dropped_blocks.items())),
        }
