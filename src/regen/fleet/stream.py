"""Read a streamed (SSE) chat completion into the same shape as a non-streamed one.

Streaming costs client CPU (one event per token) but it is the only way to tell a slow
answer from a stalled one: with `--stream`, a response that sends no data event for
`--stall-timeout` seconds is cut and retried, however long the whole answer may take.

After the HTTP 200 an engine can still fail: SGLang and vLLM then send one
`data: {"error": {...}}` event and `data: [DONE]`. That event is the error it names, and a
stream that ends without a finish reason for its choice is broken off, never an answer.
"""

from __future__ import annotations

from typing import Any

import orjson

from regen.errors import ServerFault, TransportError
from regen.fleet.http_errors import event_error


class StreamAccumulator:
    def __init__(self, server: str) -> None:
        self.server = server
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.prompt_token_ids: list[int] | None = None
        self.token_ids: list[int] | None = None
        self.metrics: dict[str, Any] | None = None
        self.sglext: dict[str, Any] | None = None
        self.logprobs: list[dict[str, Any]] | None = None  # each chunk's own, in order
        self.done = False

    def feed(self, raw: bytes) -> bool:
        """Take one line; True when it was a data event (progress), False for blank
        separators, comments such as vLLM's `: keep-alive`, and event names."""
        line = raw.strip()
        if not line.startswith(b"data:"):
            return False
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return True
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ServerFault(
                f"a stream event is not JSON: {data[:120]!r}", server=self.server
            ) from exc
        if not isinstance(chunk, dict):
            raise ServerFault(
                f"a stream event is not an object: {data[:120]!r}", server=self.server
            )
        if chunk.get("error") is not None:
            raise event_error(chunk["error"], self.server)
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if chunk.get("metrics"):  # vLLM: per-request metrics ride on the final usage chunk
            self.metrics = chunk["metrics"]
        if chunk.get("sglext"):  # SGLang: its extensions come in a chunk of their own
            self.sglext = {**(self.sglext or {}), **chunk["sglext"]}
        if chunk.get("prompt_token_ids") is not None:  # vLLM: in the first chunk
            self.prompt_token_ids = chunk["prompt_token_ids"]
        for choice in chunk.get("choices") or []:
            self._feed_delta(choice.get("delta") or {})
            if choice.get("token_ids") is not None:  # vLLM: this chunk's own ids
                self.token_ids = (self.token_ids or []) + list(choice["token_ids"])
            if (choice.get("logprobs") or {}).get("content") is not None:
                self.logprobs = self.logprobs or []
                self.logprobs.extend(choice["logprobs"]["content"])
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return True

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
        if self.finish_reason is None:
            ended = "with [DONE]" if self.done else "early"
            raise TransportError(
                f"the response stream ended {ended} before the answer had a finish reason",
                server=self.server,
            )
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content)}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[k] for k in sorted(self.tool_calls)]
        choice: dict[str, Any] = {"index": 0, "message": message}
        choice["finish_reason"] = self.finish_reason
        if self.logprobs is not None:
            choice["logprobs"] = {"content": self.logprobs}
        data: dict[str, Any] = {"choices": [choice], "usage": self.usage or {}}
        if self.token_ids is not None:
            choice["token_ids"] = self.token_ids
            data["prompt_token_ids"] = self.prompt_token_ids
        if self.metrics is not None:
            data["metrics"] = self.metrics
        if self.sglext is not None:
            data["sglext"] = self.sglext
        return data
