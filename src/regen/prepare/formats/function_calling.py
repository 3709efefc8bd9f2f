"""Function-calling records (Hermes Function Calling and friends): tools in a `tools` column or
in the system prompt between <tools> tags; calls in <tool_call> tags and results in
<tool_response> tags, as JSON or as Python literals (one tool turn may answer several
calls: see `regen.prepare.formats.responses`). Turns may be ShareGPT or OpenAI shaped.

Tools found in the system prompt move to `tools` (and out of the system text) so the target
model's chat template renders them once, in its own format.
"""

from __future__ import annotations

import re

from regen.errors import InputError
from regen.prepare.formats.base import Adapter, Converted, Options, first_turn
from regen.prepare.formats.openai import OpenAIMessages
from regen.prepare.formats.responses import pair_responses
from regen.prepare.formats.sharegpt import TURN_KEYS, ShareGPT
from regen.prepare.tools import normalise_tools, parse_payload, tool_call

TOOLS_RE = re.compile(r"<tools>(.*?)</tools>", re.S)
CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


class FunctionCalling(Adapter):
    name = "function_calling"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.sharegpt = ShareGPT(options)
        self.openai = OpenAIMessages(options)

    @classmethod
    def detect(cls, row: dict) -> str | None:
        found = first_turn(row, TURN_KEYS)
        if not found:
            return None
        turns = row[found[0]]
        texts = [str(t.get("value", t.get("content", ""))) for t in turns if isinstance(t, dict)]
        if any("<tools>" in t for t in texts[:2]):
            return f"'{found[0]}' has a <tools> block in the system prompt"
        if any("<tool_call>" in t for t in texts):
            return f"'{found[0]}' has <tool_call> payloads"
        return None

    def convert(self, row: dict) -> Converted:
        inner = self.sharegpt if ShareGPT.detect(row) else self.openai
        converted = inner.convert(row)
        for i, message in enumerate(converted.messages):
            if not isinstance(message["content"], str):
                continue
            if message["role"] == "system" and converted.tools is None:
                converted.tools = self.system_tools(message)
            elif message["role"] == "assistant":
                self.extract_calls(message, i)
        converted.messages = pair_responses(converted.messages)  # parallel calls' results
        return converted

    def system_tools(self, message: dict) -> list[dict] | None:
        blocks = TOOLS_RE.findall(message["content"])
        if not blocks:
            return None
        tools: list[dict] = []
        for block in blocks:
            tools += normalise_tools(_schemas(block)) or []
        message["content"] = TOOLS_RE.sub("", message["content"]).strip()
        return tools or None

    def extract_calls(self, message: dict, i: int) -> None:
        payloads = CALL_RE.findall(message["content"])
        if not payloads:
            return
        calls = message.setdefault("tool_calls", [])
        for k, payload in enumerate(payloads):
            call = parse_payload(payload, "tool call")
            if not isinstance(call, dict):
                raise InputError("a <tool_call> payload is not an object", kind="bad_tool_call")
            calls.append(tool_call(call.get("name"), call.get("arguments"), f"call_{i}_{k}"))
        message["content"] = CALL_RE.sub("", message["content"]).strip()


def _schemas(block: str) -> list:
    """A <tools> block: one list, or one schema per line (both occur in Hermes data)."""
    block = block.strip()
    try:
        parsed = parse_payload(block, "tools")
    except InputError:
        lines = [line for line in block.splitlines() if line.strip()]
        return [parse_payload(line, "tools") for line in lines]
    return parsed if isinstance(parsed, list) else [parsed]
