"""Read a streamed (SSE) chat completion into the same shape as a non-streamed one.

Streaming costs client CPU (one event per token) but it is the only way to tell a slow
answer from a stalled one: with `--stream`, a response that sends nothing for
`--stall-timeout` seconds is cut and retried, however long the whole answer may take.
"""

from __future__ import annotations

from typing import Any

import orjson

from regen.errors import ServerFault, TransportError


class StreamAccumulator:
    def __init__(self, server: str) -> None:
        self.server = server
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False

    def feed(self, raw: bytes) -> None:
        line = raw.strip()
        if not line.startswith(b"data:"):
            return  # blank separators, comments, event names
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ServerFault(
                f"a stream event is not JSON: {data[:120]!r}", server=self.server
            ) from exc
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            self._feed_delta(choice.get("delta") or {})
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def _feed_delta(self, delta: dict[str, Any]) -> None:
        if delta.get("content"):
            self.content.append(delta["content"])
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            self.reasoning.append(reasoning)
        for part in delta.get("tool_calls") or []:
            call = self.tool_calls.setdefault(
                part.get("index", len(self.tool_calls)),
                {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            call["id"] = part.get("id") or call["id"]
            function = part.get("function") or {}
            call["function"]["name"] += function.get("name") or ""
            call["function"]["arguments"] += function.get("arguments") or ""

    def response(self) -> dict[str, Any]:
        """The non-streamed response body this stream adds up to."""
        if not self.done and self.finish_reason is None:
            raise TransportError(
                "the response stream ended before the answer did", server=self.server
            )
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content)}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[k] for k in sorted(self.tool_calls)]
        return {
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": self.usage or {},
        }
