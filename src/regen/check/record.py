"""A read-only view of one completion line, with the facts check and export ask about."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from regen.errors import InputError
from regen.records import NO_SOURCE, source_name


@dataclass(frozen=True)
class Completion:
    raw: dict

    @classmethod
    def of(cls, raw: Any) -> Completion:
        if not isinstance(raw, dict):
            raise InputError("a completion line must be a JSON object", kind="bad_type")
        messages = raw.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InputError(f"{raw.get('id')!r}: no messages", kind="bad_messages")
        if not any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages):
            raise InputError(f"{raw.get('id')!r}: no assistant turn", kind="no_assistant")
        return cls(raw)

    @property
    def id(self) -> str:
        return f"{self.raw.get('id')}#{self.raw.get('sample', 0)}"

    @property
    def messages(self) -> list[dict]:
        return self.raw["messages"]

    @property
    def tools(self) -> list | None:
        return self.raw.get("tools") or None

    @property
    def final(self) -> dict:
        """The last assistant message: the one this line's generation produced."""
        return next(m for m in reversed(self.messages) if m.get("role") == "assistant")

    @property
    def regenerated(self) -> frozenset[int]:
        """Indices of the assistant messages the target wrote. A run regenerates the last
        assistant turn, or (`--regenerate-turns all`) every one, and records each request in
        `meta.turns` when there was more than one; the other assistant turns came from the
        source dataset (another model, a person)."""
        assistant = [i for i, m in enumerate(self.messages) if m.get("role") == "assistant"]
        turns = (self.raw.get("meta") or {}).get("turns")
        count = len(turns) if isinstance(turns, list) and turns else 1
        return frozenset(assistant[-count:])

    @property
    def answer(self) -> str:
        return self.final.get("content") or ""

    @property
    def reasoning(self) -> str:
        return self.final.get("reasoning_content") or ""

    @property
    def has_tool_calls(self) -> bool:
        return bool(self.final.get("tool_calls"))

    @property
    def thinking(self) -> str:
        """The thinking mode the run asked the server for: on, off, or auto (also when unknown)."""
        sampling = (self.raw.get("meta") or {}).get("sampling") or {}
        return sampling.get("thinking") or "auto"

    @property
    def finish_reason(self) -> str:
        return self.raw.get("finish_reason") or "unknown"

    @property
    def source(self) -> str:
        return source_name(self.raw.get("source"))

    @property
    def category(self) -> str:
        return str(self.raw.get("category") or NO_SOURCE)

    @property
    def completion_ids(self) -> list[int] | None:
        ids = self.raw.get("token_ids")
        if isinstance(ids, dict) and isinstance(ids.get("completion"), list):
            return ids["completion"]
        return None
