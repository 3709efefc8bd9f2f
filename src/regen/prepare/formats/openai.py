"""OpenAI chat `messages` (system/developer/user/assistant/tool), `tool_calls` with JSON-string
arguments, content as a string or a list of parts, plus an optional `tools` column."""

from __future__ import annotations

from collections import Counter

from regen.errors import InputError
from regen.prepare.formats.base import Adapter, Converted, first_turn
from regen.prepare.tools import normalise_tool_calls, normalise_tools


class OpenAIMessages(Adapter):
    name = "openai"

    @classmethod
    def detect(cls, row: dict) -> str | None:
        found = first_turn(row, ("messages",))
        if found and "role" in found[1]:
            return "'messages' holds role/content dicts"
        return None

    def convert(self, row: dict) -> Converted:
        raw = row.get("messages")
        if not isinstance(raw, list) or not raw:
            raise InputError(
                "no non-empty 'messages' list",
                kind="missing_field",
                hint="point --format at the right adapter, or fix the record",
            )
        dropped: Counter = Counter()
        messages = [self.message(m, i, dropped) for i, m in enumerate(raw)]
        tools = normalise_tools(row.get("tools", row.get("functions")))
        return Converted(messages, tools, frozenset({"messages", "tools", "functions"}), dropped)

    def message(self, raw: object, i: int, dropped: Counter) -> dict:
        if not isinstance(raw, dict):
            raise InputError(f"message {i} is not an object", kind="bad_message")
        role = self.role(raw.get("role"))
        message: dict = {"role": role, "content": self.content(raw.get("content"), dropped)}
        if role == "assistant":
            calls = raw.get("tool_calls") or raw.get("function_call")  # legacy single call
            if calls:
                message["tool_calls"] = normalise_tool_calls(calls, f"call_{i}")
        if role == "tool":
            for key in ("tool_call_id", "name"):
                if isinstance(raw.get(key), str):
                    message[key] = raw[key]
        return message
