"""Tool schemas and tool calls in OpenAI form, from JSON, Python literals or Anthropic shapes.

Function-calling datasets (Hermes and friends) often hold Python reprs (`{'name': 'x'}`)
rather than JSON; `ast.literal_eval` reads those without executing anything.
"""

from __future__ import annotations

import ast
from typing import Any

import orjson

from regen.errors import InputError


def parse_payload(text: str, what: str) -> Any:
    """Parse JSON, else a Python literal; raise an InputError naming `what` otherwise."""
    text = text.strip()
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise InputError(
            f"{what} is neither JSON nor a Python literal: {text[:80]!r}",
            kind=f"bad_{what.replace(' ', '_')}",
            hint="fix the record, or choose another --format if this is not a tool payload",
        ) from exc


def normalise_tools(raw: Any) -> list[dict] | None:
    """A `tools` value (list, single schema, or a JSON/literal string of either) → OpenAI list."""
    if raw is None or raw == "" or raw == []:
        return None
    if isinstance(raw, str):
        raw = parse_payload(raw, "tools")
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise InputError(f"tools must be a list, got {type(raw).__name__}", kind="bad_tools")
    return [_tool_schema(item) for item in raw] or None


def _tool_schema(item: Any) -> dict:
    if isinstance(item, str):
        item = parse_payload(item, "tools")
    if not isinstance(item, dict):
        raise InputError("a tool schema is not an object", kind="bad_tools")
    if isinstance(item.get("function"), dict):
        return {"type": "function", "function": item["function"]}
    if not isinstance(item.get("name"), str):
        raise InputError("a tool schema has no 'name'", kind="bad_tools")
    function = {"name": item["name"]}
    if item.get("description") is not None:
        function["description"] = item["description"]
    parameters = item.get("parameters", item.get("input_schema"))  # Anthropic: input_schema
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def tool_call(name: Any, arguments: Any, call_id: str) -> dict:
    """One OpenAI tool call; arguments always end up a JSON string, as the API sends them."""
    if not isinstance(name, str) or not name:
        raise InputError("a tool call has no function name", kind="bad_tool_call")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, str):
        arguments = orjson.dumps(arguments).decode()
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def normalise_tool_calls(raw: Any, prefix: str) -> list[dict]:
    """OpenAI `tool_calls` (or bare {name, arguments} dicts) with ids filled in where missing."""
    if isinstance(raw, str):
        raw = parse_payload(raw, "tool call")
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise InputError("tool_calls must be a list", kind="bad_tool_call")
    calls = []
    for k, call in enumerate(raw):
        if not isinstance(call, dict):
            raise InputError("a tool call is not an object", kind="bad_tool_call")
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        call_id = call.get("id") or f"{prefix}_{k}"
        calls.append(tool_call(fn.get("name"), fn.get("arguments", fn.get("parameters")), call_id))
    return calls


def link_tool_results(messages: list[dict]) -> None:
    """Give each tool message without a `tool_call_id` the id of the call it answers (in order)."""
    pending: list[str] = []
    for message in messages:
        if message["role"] == "assistant":
            pending = [c["id"] for c in message.get("tool_calls", [])]
        elif message["role"] == "tool" and "tool_call_id" not in message and pending:
            message["tool_call_id"] = pending.pop(0)
