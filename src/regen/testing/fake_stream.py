"""How a fake server sends an answer as a stream (SSE, the way SGLang and vLLM do), and the
faults that cut a response short midway: a stall, an in-stream error, [DONE] without the
finish reason, a connection reset."""

from __future__ import annotations

import asyncio
from asyncio import FIRST_COMPLETED
from typing import Any

import orjson
from aiohttp import web

from regen.testing.fake_answers import stream_events
from regen.testing.fake_behaviour import Behaviour
from regen.testing.fake_engine import FakeEngine, Job
from regen.testing.fake_faults import stream_error_event


async def send_stream(
    request: web.Request, behaviour: Behaviour, data: dict[str, Any], fault: str
) -> tuple[web.StreamResponse, bool]:
    """Send `data` as SSE chunks; True with the response when the answer went out whole.
    Faults: `stall` stops halfway (sending keep-alive comments if the behaviour says so),
    `stream_error` sends an error event and [DONE] halfway, `done_early` sends [DONE]
    without the finish reason. With `stream_write_size`, the bytes go out in writes of that
    size, cutting events anywhere, as a proxy or a busy socket may deliver them."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    try:
        await response.prepare(request)
        await _send_events(response, behaviour, stream_events(data), fault)
    except ConnectionResetError:
        # The client went away (it read the error event and closed, a copy no longer
        # needed, a run that stopped): not an answer sent whole, and no error of the server's
        return response, False
    return response, fault not in ("stream_error", "done_early")


async def _send_events(
    response: web.StreamResponse, behaviour: Behaviour, events: list[dict[str, Any]], fault: str
) -> None:
    """The events of `send_stream`, cut short or stalled as `fault` says, then [DONE]."""
    send = _Sender(response, behaviour.stream_write_size)
    for i, event in enumerate(events):
        if i == (len(events) - 2) // 2:
            if fault == "stall":
                await send.flush()
                await _stall(response, behaviour.keep_alive)
            if fault == "stream_error":
                await send(b"data: " + orjson.dumps(stream_error_event()) + b"\n\n")
                break
        if fault == "done_early" and i == len(events) - 2:
            break  # the chunk with the finish reason never comes
        await send(b"data: " + orjson.dumps(event) + b"\n\n")
    await send(b"data: [DONE]\n\n")
    await send.flush()


async def send_paced(
    request: web.Request, data: dict[str, Any], engine: FakeEngine, job: Job
) -> web.StreamResponse:
    """Send `data` as SSE chunks while the engine decodes `job`: a chunk goes out once the
    job has decoded its share of the answer, as a real engine streams (a client sees tokens
    arriving while the answer grows, and none while the job waits or is recomputed)."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    events = [b"data: " + orjson.dumps(event) + b"\n\n" for event in stream_events(data)]
    finished = asyncio.ensure_future(engine.wait(job))
    sent = 0
    try:
        # (a client gone before the headers, as a withdrawn request may be: dropped too)
        await response.prepare(request)
        while not finished.done():
            await asyncio.wait([finished, engine.next_tick()], return_when=FIRST_COMPLETED)
            due = min(len(events) - 1, len(events) * job.generated // job.wanted)
            if due > sent:
                await response.write(b"".join(events[sent:due]))
                sent = due
        await finished
        await response.write(b"".join(events[sent:]) + b"data: [DONE]\n\n")
    except ConnectionResetError:
        pass  # the client went away (a run that stopped, a copy no longer needed), as it may
    finally:
        finished.cancel()  # the client went away: the engine drops the job
        engine.drop(job)  # (a wait cancelled before it began would not)
    return response


class _Sender:
    """One write per event, or (with a size) the bytes regrouped into writes of that size."""

    def __init__(self, response: web.StreamResponse, size: int) -> None:
        self.response, self.size, self.held = response, size, b""

    async def __call__(self, data: bytes) -> None:
        if not self.size:
            await self.response.write(data)
            return
        self.held += data
        while len(self.held) >= self.size:
            piece, self.held = self.held[: self.size], self.held[self.size :]
            await self.response.write(piece)
            await asyncio.sleep(0)  # let each piece reach the socket on its own

    async def flush(self) -> None:
        if self.held:
            await self.response.write(self.held)
            self.held = b""


async def _stall(response: web.StreamResponse, interval: float | None) -> None:
    """Send nothing more, or only SSE comments (vLLM's --sse-keep-alive-interval:
    VL:entrypoints/serve/utils/sse_keep_alive.py), for an hour."""
    if interval is None:
        await asyncio.sleep(3600)
    for _ in range(int(3600 / interval) if interval else 0):
        await response.write(b": keep-alive\n\n")
        await asyncio.sleep(interval)


async def reset_midway(request: web.Request, payload: bytes) -> web.StreamResponse:
    """Half the body, then the connection is cut (a server that died mid-answer)."""
    response = web.StreamResponse(headers={"Content-Length": str(len(payload))})
    response.content_type = "application/json"
    await response.prepare(request)
    await response.write(payload[: len(payload) // 2])
    assert request.transport is not None
    request.transport.abort()
    return response
