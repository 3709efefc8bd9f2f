"""The normalised prompt record and the skip signal; nothing else lives here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from regen.errors import InputError


class Skip(InputError):
    """A record that converts fine but is deliberately left out (an auxiliary API call, or a
    request that a later request of the same session contains). Counted and written to the
    rejects file like a reject, but reported apart: it is not something the user must fix."""


@dataclass(slots=True)
class Prompt:
    """One line of the prompt file that `regen generate` reads."""

    id: str
    messages: list[dict]
    tools: list[dict] | None
    source: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "messages": self.messages}
        if self.tools:
            out["tools"] = self.tools
        out["source"] = self.source
        out["meta"] = self.meta
        return out
