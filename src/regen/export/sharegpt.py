"""ShareGPT rows, in the layout each trainer's own converter accepts.

LLaMA-Factory (`sharegpt-llamafactory`, also `sharegpt`) reads from/value turns that must
alternate: human or observation, then gpt or function_call, after an optional first system
turn, ending on the assistant side; any other row is skipped with a log line. So an
assistant turn with text and tool calls is one `function_call` turn whose value is the text
followed by `<tool_call>[calls as JSON]</tool_call>` (its FunctionFormatter splits the two),
and consecutive tool results are one `observation` (a JSON list when there are several).
What still cannot alternate (a user turn right after a tool result) is named per row.

axolotl (`sharegpt-axolotl`, `type: chat_template`) maps from -> role with its default roles
(human, gpt, system, tool) and keeps OpenAI `tool_calls` / `tool_call_id` for the template to
render; `train` on each assistant turn says whether the target wrote it
(`message_field_training: train`). It stops on tool-call arguments that are not JSON.
"""

from __future__ import annotations

from typing import Any

import orjson

from regen.export.format_base import Format, inline_reasoning, named
from regen.finished.mask import Encoded
from regen.finished.record import Completion

USER_SIDE, ASSISTANT_SIDE = ("human", "observation"), ("gpt", "function_call")


def _arguments(call: dict) -> Any:
    """A call's arguments as JSON data; text that is not JSON stays text (check's
    bad_tool_call rule counts it)."""
    args = (call.get("function") or {}).get("arguments")
    if isinstance(args, str):
        try:
            return orjson.loads(args)
        except orjson.JSONDecodeError:
            return args
    return args


class ShareGPTLlamaFactory(Format):
    name = "sharegpt-llamafactory"
    trainer = "LLaMA-Factory's ShareGPT converter"
    per_domain = False  # dataset_info.json names one file
    last_turn_only = "set mask_history: true in LLaMA-Factory (it trains every turn otherwise)"
    how_to_train = (
        'LLaMA-Factory: dataset_info.json {"NAME": {"file_name": '
        '"OUT/data/default/train-00000-of-00001.jsonl", "formatting": "sharegpt", '
        '"columns": {"messages": "conversations", "tools": "tools"}}}.'
    )
    several_files = (
        "The train split is {n} files (--max-file-mb): add one such entry per file and "
        "list them all in `dataset`."
    )

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        turns: list[dict[str, str]] = []
        results: list[str] = []  # consecutive tool results, one observation
        for m in completion.messages:
            if m.get("role") == "tool":
                results.append(str(m.get("content") or ""))
                continue
            if results:
                turns.append({"from": "observation", "value": _joined(results)})
                results = []
            turns.append(self._turn(m))
        if results:
            turns.append({"from": "observation", "value": _joined(results)})
        row: dict[str, Any] = {**named(completion), "conversations": turns}
        if completion.tools:
            row["tools"] = orjson.dumps(completion.tools).decode()  # a JSON string, as it reads
        return row

    def _turn(self, m: dict) -> dict[str, str]:
        content, _ = inline_reasoning(m, "drop" if self.reasoning == "drop" else "inline")
        role = {"system": "system", "user": "human", "assistant": "gpt"}.get(m["role"], m["role"])
        calls = m.get("tool_calls") or []
        if not calls:
            return {"from": role, "value": content}
        named = [
            {"name": (c.get("function") or {}).get("name"), "arguments": _arguments(c)}
            for c in calls
        ]
        data = orjson.dumps(named[0] if len(named) == 1 else named).decode()
        value = f"{content}<tool_call>{data}</tool_call>" if content else data
        return {"from": "function_call", "value": value}

    def problem(self, row: dict[str, Any]) -> str | None:
        """LLaMA-Factory's own acceptance rule (SharegptDatasetConverter)."""
        turns = row["conversations"]
        if turns and turns[0]["from"] == "system":
            turns = turns[1:]
        for i, turn in enumerate(turns):
            side = USER_SIDE if i % 2 == 0 else ASSISTANT_SIDE
            if turn["from"] not in side:
                before = turns[i - 1]["from"] if i else "the start"
                return f"a {turn['from']} turn after {before} (the turns must alternate)"
        return "the row does not end on an assistant turn" if len(turns) % 2 else None


def _joined(results: list[str]) -> str:
    return results[0] if len(results) == 1 else orjson.dumps(results).decode()


class ShareGPTAxolotl(Format):
    name = "sharegpt-axolotl"
    trainer = "axolotl's chat_template strategy"
    last_turn_only = "set message_field_training: train in axolotl's dataset config"
    how_to_train = (
        "axolotl: datasets: [{path: OUT, name: default, split: train, type: chat_template, "
        "field_messages: conversations, message_property_mappings: {role: from, content: "
        "value}, message_field_training: train}] (its default roles read human, gpt, system "
        "and tool)."
    )

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        written = completion.regenerated
        turns = []
        for i, m in enumerate(completion.messages):
            content, _ = inline_reasoning(m, "drop" if self.reasoning == "drop" else "inline")
            turn: dict[str, Any] = {"from": ROLES.get(m["role"], m["role"]), "value": content}
            for key in ("tool_calls", "tool_call_id", "name"):
                if m.get(key):
                    turn[key] = m[key]
            if m["role"] == "assistant":
                turn["train"] = self.supervise == "all" or i in written
            turns.append(turn)
        row: dict[str, Any] = {**named(completion), "conversations": turns}
        if completion.tools:
            row["tools"] = completion.tools
        return row

    def problem(self, row: dict[str, Any]) -> str | None:
        for turn in row["conversations"]:
            for call in turn.get("tool_calls") or []:
                if isinstance(_arguments(call), str):
                    return "tool-call arguments that are not JSON (axolotl stops on them)"
        return None


ROLES = {"system": "system", "user": "human", "assistant": "gpt", "tool": "tool"}
