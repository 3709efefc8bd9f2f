"""What every format adapter is: one class that turns one row into messages (+ tools).

Adapters only decide shape. Reading, counting, rejects, the trailing-answer drop, hashing
and meta live in the base loop (`regen.prepare.convert` and `regen.prepare.pipeline`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from regen.chat import canonical_role, flatten
from regen.prepare.auxiliary import AuxRules


@dataclass(frozen=True)
class Options:
    role_map: dict[str, str] = field(default_factory=dict)
    keep_multimodal: bool = False
    auxiliary: AuxRules = field(default_factory=AuxRules)


@dataclass
class Converted:
    """An adapter's answer. `used` names the row keys consumed; every other key goes to meta."""

    messages: list[dict]
    tools: list[dict] | None = None
    used: frozenset[str] = frozenset()
    dropped: Counter = field(default_factory=Counter)


class Adapter:
    name: ClassVar[str]
    needs_scan: ClassVar[bool] = False  # True: the base feeds the rows once before converting

    def __init__(self, options: Options) -> None:
        self.options = options
        self._roles: dict[str, str] = {}  # label -> role: a few labels, millions of turns

    @classmethod
    def detect(cls, row: dict) -> str | None:
        """Why this row looks like this format, or None."""
        raise NotImplementedError

    def convert(self, row: dict) -> Converted:
        """Raise InputError (or Skip) with a reason that says what to change."""
        raise NotImplementedError

    def scan(self, rows: Iterable[dict]) -> None:
        """Pre-pass for formats that must see the whole source first (traces)."""

    # Helpers shared by adapters.
    def role(self, label: Any) -> str:
        if isinstance(label, str) and label in self._roles:
            return self._roles[label]
        role = canonical_role(label, self.options.role_map)  # raises for unknown labels
        self._roles[label] = role
        return role

    def content(self, raw: Any, dropped: Counter) -> str | list[dict]:
        if type(raw) is str:  # the common case, without the call
            return raw
        return flatten(raw, keep_multimodal=self.options.keep_multimodal, dropped=dropped)


def first_turn(row: dict, keys: tuple[str, ...]) -> tuple[str, dict] | None:
    """The first of `keys` holding a non-empty list of objects, and its first element."""
    for key in keys:
        value = row.get(key)
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return key, value[0]
    return None
