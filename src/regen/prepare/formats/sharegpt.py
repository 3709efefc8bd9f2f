"""ShareGPT: `conversations` of {from, value} turns (human, gpt, system, tool, function_call,
observation, ...), with an optional `system` column and `tools` column (LLaMA-Factory style)."""

from __future__ import annotations

from collections import Counter

from regen.errors import InputError
from regen.prepare.formats.base import Adapter, Converted, first_turn
from regen.prepare.tools import link_tool_results, normalise_tool_calls, normalise_tools

TURN_KEYS = ("conversations", "conversation", "messages")
USED = {key: frozenset({key, "system", "tools"}) for key in TURN_KEYS}  # built once, not per row


class ShareGPT(Adapter):
    name = "sharegpt"

    @classmethod
    def detect(cls, row: dict) -> str | None:
        found = first_turn(row, TURN_KEYS)
        if found and "from" in found[1]:
            return f"'{found[0]}' holds from/value turns"
        return None

    def convert(self, row: dict) -> Converted:
        key = None
        for k in TURN_KEYS:
            if isinstance(row.get(k), list):
                key = k
                break
        if key is None or not row[key]:
            raise InputError(
                "no non-empty 'conversations' list",
                kind="missing_field",
                hint="point --format at the right adapter, or fix the record",
            )
        dropped: Counter = Counter()
        messages = []
        if isinstance(row.get("system"), str) and row["system"].strip():
            messages.append({"role": "system", "content": row["system"]})
        for i, turn in enumerate(row[key]):
            messages.append(self.turn(turn, i, dropped))
        link_tool_results(messages)
        tools = normalise_tools(row.get("tools"))
        return Converted(messages, tools, USED[key], dropped)

    def turn(self, turn: object, i: int, dropped: Counter) -> dict:
        if not isinstance(turn, dict):
            raise InputError(f"turn {i} is not an object", kind="bad_message")
        label = turn["from"] if "from" in turn else turn.get("role")
        value = turn["value"] if "value" in turn else turn.get("content")
        if isinstance(label, str) and label.lower() == "function_call":
            return {
                "role": "assistant",
                "content": "",
                "tool_calls": normalise_tool_calls(value, f"call_{i}"),
            }
        message: dict = {"role": self.role(label), "content": self.content(value, dropped)}
        if message["role"] == "tool" and isinstance(turn.get("name"), str):
            message["name"] = turn["name"]
        return message
