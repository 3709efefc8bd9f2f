"""The least HTTP/1.1 a benchmark's streaming server needs, on a bare asyncio protocol.

Keep-alive, a Content-Length body, JSON replies, and a streamed reply in chunked transfer
encoding whose chunks the caller writes itself (pre-framed). A web framework would cost a
few microseconds a write in this process; at 30K events a second that is a core's share the
client under test should have. Flow control: `paused` while the socket's buffer is full.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

HIGH_WATER = 64 * 1024  # bytes buffered for a slow reader before its answer is held back
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)
REASONS = {200: b"OK", 404: b"Not Found", 400: b"Bad Request"}


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any


# (connection, method, path, body) -> a whole reply, or None when the caller streams one
Handler = Callable[["HttpConnection", str, str, bytes], Reply | None]


class HttpConnection(asyncio.Protocol):
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self.closed = False
        self._buffer = b""
        self._streaming = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=HIGH_WATER)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while not self._streaming and self._next_request():
            pass

    def _next_request(self) -> bool:
        """Handle one whole request from the buffer; False when it is not all here yet."""
        head_end = self._buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return False
        head = self._buffer[:head_end].decode("latin-1").split("\r\n")
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        end = head_end + 4 + length
        if len(self._buffer) < end:
            return False
        body, self._buffer = self._buffer[head_end + 4 : end], self._buffer[end:]
        method, path, _ = head[0].split(" ", 2)
        reply = self.handler(self, method, path, body)
        if reply is not None:
            self._send(reply)
        return True

    def _send(self, reply: Reply) -> None:
        assert self.transport is not None
        payload = orjson.dumps(reply.body)
        head = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        reason = REASONS.get(reply.status, b"Error")
        self.transport.write(head % (reply.status, reason, len(payload)) + payload)

    # -- a streamed reply ----------------------------------------------------------------
    def send_head(self) -> None:
        assert self.transport is not None
        self._streaming = True
        self.transport.write(STREAM_HEAD)

    def write(self, framed: bytes) -> None:
        """Pre-framed chunks (`<hex length>\\r\\n<data>\\r\\n`), as they are."""
        if not self.closed and self.transport is not None:
            self.transport.write(framed)

    def finish(self) -> None:
        """The stream's last chunk; the connection then takes its next request."""
        self.write(b"0\r\n\r\n")
        self._streaming = False
        if self._buffer:
            self.data_received(b"")
