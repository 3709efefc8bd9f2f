"""Captured HTTP traces: a record whose request `body` (top level or under `request`) is an
OpenAI chat request or an Anthropic Messages request (top-level `system`; content blocks
text, image, tool_use, tool_result, thinking).

Two kinds of request are skipped with a reason: agent auxiliary calls (title generation,
quota probes, token counting: see `regen.prepare.auxiliary`) and requests that are a prefix
of a longer request in the same session, since the longer one already holds that
conversation. Finding the second needs the whole source first, hence the `scan` pre-pass
(it keeps one 8-byte hash per message).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import orjson
import xxhash

from regen.chat import join_text_parts
from regen.errors import InputError
from regen.jsonio import canonical
from regen.prepare.formats.base import Adapter, Converted, Options
from regen.prepare.formats.openai import OpenAIMessages
from regen.prepare.skip import Skip
from regen.prepare.tools import normalise_tools, tool_call

SESSION_KEYS = ("session_id", "session", "conversation_id", "trace_id")


class Traces(Adapter):
    name = "traces"
    needs_scan = True

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.openai = OpenAIMessages(options)
        self.prefixes: set[int] = set()

    @classmethod
    def detect(cls, row: dict) -> str | None:
        if "body" in row or isinstance(row.get("request"), dict):
            return "rows carry an HTTP request 'body'"
        return None

    def scan(self, rows: Iterable[dict]) -> None:
        for row in rows:
            try:
                converted = self.parse(row)
            except InputError:
                continue  # rejected with its reason in the main pass
            session = _session(row, converted[1])
            if session is None:
                continue
            for key in _chain(session, converted[0].messages)[:-1]:
                self.prefixes.add(key)

    def convert(self, row: dict) -> Converted:
        converted, body = self.parse(row)
        session = _session(row, body)
        if session is not None and _chain(session, converted.messages)[-1] in self.prefixes:
            raise Skip(
                f"request is a prefix of a longer request in session {session}",
                kind="prefix_of_later_request",
            )
        return converted

    def parse(self, row: dict) -> tuple[Converted, dict]:
        request = row.get("request") if isinstance(row.get("request"), dict) else row
        body = request.get("body")
        if isinstance(body, (str, bytes)):
            try:
                body = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise InputError("request body is not JSON", kind="bad_body") from exc
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise InputError(
                "request body has no 'messages' list",
                kind="bad_body",
                hint="only chat requests (OpenAI or Anthropic Messages) are prompts",
            )
        self.check_auxiliary(request, body)
        if _is_anthropic(request, body):
            converted = self.anthropic(body)
        else:
            converted = self.openai.convert(body)
        converted.used = frozenset({"body", "request", "response"})  # response: the old answer
        return converted, body

    def check_auxiliary(self, request: dict, body: dict) -> None:
        url = str(request.get("url", request.get("path", "")))
        self.options.auxiliary.check(url.split("?", 1)[0].rstrip("/"), body)

    def anthropic(self, body: dict) -> Converted:
        dropped: Counter = Counter()
        messages: list[dict] = []
        if body.get("system"):
            messages.append({"role": "system", "content": self.content(body["system"], dropped)})
        for i, raw in enumerate(body["messages"]):
            if not isinstance(raw, dict):
                raise InputError(f"message {i} is not an object", kind="bad_message")
            messages += self.anthropic_message(self.role(raw.get("role")), raw, i, dropped)
        return Converted(messages, normalise_tools(body.get("tools")), dropped=dropped)

    def anthropic_message(self, role: str, raw: dict, i: int, dropped: Counter) -> list[dict]:
        """tool_use blocks become tool_calls; tool_result blocks become tool messages."""
        blocks = raw.get("content")
        if not isinstance(blocks, list):
            return [{"role": role, "content": self.content(blocks, dropped)}]
        out: list[dict] = []
        calls, rest = [], []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use":
                calls.append(tool_call(block.get("name"), block.get("input"), str(block.get("id"))))
            elif kind == "tool_result":
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": str(block.get("tool_use_id")),
                        "content": _text_only(self.content(block.get("content"), dropped)),
                    }
                )
            else:
                rest.append(block)
        content = self.content(rest, dropped)
        if calls:
            out.append({"role": role, "content": content, "tool_calls": calls})
        elif content or not out:  # an emptied turn stays, so the base rejects it by name
            out.append({"role": role, "content": content})
        return out


def _text_only(content: Any) -> str:
    """A tool message must be text; kept image parts inside a tool result are dropped."""
    if isinstance(content, str):
        return content
    return join_text_parts([p.get("text", "") for p in content if p.get("type") == "text"])


def _is_anthropic(request: dict, body: dict) -> bool:
    if str(request.get("url", request.get("path", ""))).split("?")[0].endswith("/messages"):
        return True
    if "system" in body or any("input_schema" in t for t in body.get("tools") or []):
        return True
    for message in body["messages"]:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "thinking")
            for b in content
        ):
            return True
    return False


def _session(row: dict, body: dict) -> str | None:
    for key in SESSION_KEYS:
        if row.get(key) is not None:
            return str(row[key])
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and metadata.get("user_id") is not None:
        return str(metadata["user_id"])  # Claude Code puts the session in here
    return None


def _chain(session: str, messages: list[dict]) -> list[int]:
    """A hash of each prefix of the conversation, scoped to the session (cheap to extend)."""
    state = xxhash.xxh3_64_intdigest(session.encode())
    keys = []
    for message in messages:
        state = xxhash.xxh3_64_intdigest(canonical(message), seed=state)
        keys.append(state)
    return keys
