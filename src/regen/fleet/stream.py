"""Read a streamed (SSE) chat completion into the same shape as a non-streamed one.

Streaming costs client CPU (one event per token) but it is the only way to tell a slow
answer from a stalled one: with `--stream`, a response that sends no data event for
`--stall-timeout` seconds is cut and retried, however long the whole answer may take.

After the HTTP 200 an engine can still fail: SGLang and vLLM then send one
`data: {"error": {...}}` event and `data: [DONE]`. That event is the error it names, and a
stream that ends without a finish reason for its choice is broken off, never an answer.

The reader is on the hot path of a thinking model's run (8,192 answers of up to 32K tokens
growing at once), so its cost per token is flat in the answer's length and its memory is a
few bytes per token: the socket's bytes are split into lines in bulk (not one await per
line), each event is decoded into typed structs holding only the fields regen reads, text
is kept as UTF-8 bytes and ids as 32-bit integers until the answer is whole.
"""

from __future__ import annotations

import asyncio
from array import array
from typing import Any, Protocol

import msgspec

from regen.errors import RequestTimeout, ServerFault, TransportError
from regen.fleet.http_errors import event_error
from regen.fleet.stream_events import Chunk, decode_event


class StreamAccumulator:
    def __init__(self, server: str) -> None:
        self.server = server
        self.content = bytearray()  # UTF-8: about a byte a character, not a str per piece
        self.reasoning = bytearray()
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.prompt_token_ids: list[int] | None = None
        self.token_ids: array[int] | None = None  # 4 bytes a token, not a 36-byte int object
        self.metrics: dict[str, Any] | None = None
        self.sglext: dict[str, Any] | None = None
        self.logprobs: array[float] | None = None  # one per answer token, when asked
        self.done = False
        self.started = False  # its first data event came (the server's owner notes it)
        self._partial: list[bytes] = []  # the start of a line the socket has not ended yet

    @property
    def has_tokens(self) -> bool:
        """Some of the answer came (text, reasoning, a tool call or ids; a role is none)."""
        return bool(self.content or self.reasoning or self.tool_calls or self.token_ids)

    def feed_bytes(self, data: bytes) -> int:
        """Take what the socket gave (any number of lines, the last one maybe cut short);
        the data events among them (progress, when not 0)."""
        if self._partial:
            if b"\n" not in data:  # still the same line: joined once it ends, not each time
                self._partial.append(data)
                return 0
            data = b"".join(self._partial) + data
            self._partial.clear()
        lines = data.split(b"\n")
        tail = lines.pop()
        if tail:
            self._partial.append(tail)
        events = 0
        for line in lines:
            if line[:5] == b"data:":
                self._feed_data(line[5:])
                events += 1
            elif line[:1] not in (b"", b"\r", b":") and self.feed(line):
                events += 1  # an unusual line (leading spaces): the careful path
        return events

    def end(self) -> None:
        """The socket closed: a last line without its newline still counts."""
        if self._partial:
            self.feed(b"".join(self._partial))
            self._partial.clear()

    def feed(self, raw: bytes) -> bool:
        """Take one line; True when it was a data event (progress), False for blank
        separators, comments such as vLLM's `: keep-alive`, and event names."""
        line = raw.strip()
        if not line.startswith(b"data:"):
            return False
        self._feed_data(line[5:])
        return True

    def _feed_data(self, data: bytes) -> None:
        try:
            chunk = decode_event(data)
        except msgspec.DecodeError as exc:
            if data.strip() == b"[DONE]":
                self.done = True
                return
            raise ServerFault(
                f"a stream event is not a chat completion chunk ({exc}): {data[:120]!r}",
                server=self.server,
            ) from exc
        if chunk.error is not None:
            raise event_error(chunk.error, self.server)
        if chunk.usage or chunk.metrics or chunk.sglext or chunk.prompt_token_ids is not None:
            self._take_extras(chunk)
        # the per-token part, written out in one function: it runs once an event
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    self.content += delta.content.encode()
                reasoning = delta.reasoning_content or delta.reasoning
                if reasoning:
                    self.reasoning += reasoning.encode()
                if delta.tool_calls:
                    self._add_tool_calls(delta.tool_calls)
            if choice.token_ids is not None:  # vLLM: this chunk's own ids
                if self.token_ids is None:
                    self.token_ids = array("i")
                try:
                    self.token_ids.extend(choice.token_ids)
                except OverflowError as exc:
                    raise self._bad_id(choice.token_ids) from exc
            if choice.logprobs is not None and choice.logprobs.content is not None:
                if self.logprobs is None:
                    self.logprobs = array("d")
                self.logprobs.extend([entry.logprob for entry in choice.logprobs.content])
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason

    def _take_extras(self, chunk: Chunk) -> None:
        if chunk.usage:
            self.usage = chunk.usage
        if chunk.metrics:  # vLLM: per-request metrics ride on the final usage chunk
            self.metrics = chunk.metrics
        if chunk.sglext:  # SGLang: its extensions come in a chunk of their own
            self.sglext = {**(self.sglext or {}), **chunk.sglext}
        if chunk.prompt_token_ids is not None:  # vLLM: in the first chunk
            self.prompt_token_ids = chunk.prompt_token_ids

    def _bad_id(self, ids: list[int]) -> ServerFault:
        return ServerFault(
            f"a stream event has a token id outside 32 bits: {max(ids, key=abs)}",
            server=self.server,
        )

    def _add_tool_calls(self, parts: list[dict[str, Any]]) -> None:
        for part in parts:
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
        message: dict[str, Any] = {"role": "assistant", "content": _text(self.content)}
        if self.reasoning:
            message["reasoning_content"] = _text(self.reasoning)
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[k] for k in sorted(self.tool_calls)]
        choice: dict[str, Any] = {"index": 0, "message": message}
        choice["finish_reason"] = self.finish_reason
        if self.logprobs is not None:  # the non-streamed shape (response.token_logprobs)
            choice["logprobs"] = {"content": [{"logprob": x} for x in self.logprobs]}
        data: dict[str, Any] = {"choices": [choice], "usage": self.usage or {}}
        if self.token_ids is not None:
            choice["token_ids"] = self.token_ids  # compact to the record (records.encode_line)
            data["prompt_token_ids"] = self.prompt_token_ids
        if self.metrics is not None:
            data["metrics"] = self.metrics
        if self.sglext is not None:
            data["sglext"] = self.sglext
        return data


def _text(utf8: bytearray) -> str:
    # pieces were whole strings, so their bytes join into valid UTF-8
    return utf8.decode()


class _Reader(Protocol):
    def set_exception(self, exc: BaseException) -> None: ...


class StallWatch:
    """Cuts a stream silent for `stall` seconds: the reader's next read raises. One timer for
    the stream, moved on only when it fires, where a read timeout costs a timer every read."""

    def __init__(self, reader: _Reader, stall: float, server: str) -> None:
        self.reader, self.stall, self.server = reader, stall, server
        self._loop = asyncio.get_running_loop()
        self.last_data = self._loop.time()  # the owner sets it at every data event
        self._timer = self._loop.call_later(stall, self._check)

    def _check(self) -> None:
        silent = self._loop.time() - self.last_data
        if silent < self.stall:
            self._timer = self._loop.call_later(self.stall - silent, self._check)
            return
        self.reader.set_exception(
            RequestTimeout(
                f"the response stream stalled: nothing for {self.stall:.0f}s", server=self.server
            )
        )

    def cancel(self) -> None:
        self._timer.cancel()
