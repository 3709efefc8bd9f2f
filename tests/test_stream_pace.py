"""A slow stream is read a few events at a time (fleet/stream_pace.py): every token still
arrives once and in order, and a real stall is still cut."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from regen.errors import RequestTimeout
from regen.fleet import stream_pace
from regen.fleet.embedded import free_port
from regen.fleet.server import Server, Timeouts
from regen.fleet.stream import StreamAccumulator
from test_stream_reader import wait_for

TOKENS = 200
POOL = 251  # regen.testing.sse_fleet's distinct token events


@contextmanager
def paced_engine(*options: str) -> Iterator[str]:
    """One sse_fleet engine sending a token every 10 ms, one token an event; stopped by pid."""
    port = free_port()
    args = [
        "--ports",
        str(port),
        "--slots",
        "4",
        "--tokens",
        str(TOKENS),
        "--seconds-per-token",
        "0.01",
        *options,
    ]
    proc = subprocess.Popen([sys.executable, "-m", "regen.testing.sse_fleet", *args])
    try:
        wait_for(f"http://127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def reads(monkeypatch) -> list[int]:
    """The data events each socket read brought (reads that brought none left out)."""
    seen: list[int] = []
    feed = StreamAccumulator.feed_bytes

    def counted(self: StreamAccumulator, data: bytes) -> int:
        events = feed(self, data)
        if events:
            seen.append(events)
        return events

    monkeypatch.setattr(StreamAccumulator, "feed_bytes", counted)
    return seen


def chat(url: str, stall: float) -> dict:
    async def ask() -> dict:
        server = Server(url, concurrency=4, timeouts=Timeouts(stall=stall, stream=True))
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "return_token_ids": True,
        }
        try:
            return await asyncio.wait_for(server.chat(body), timeout=60)
        finally:
            await server.close()

    return asyncio.run(ask())


def expected_ids() -> list[int]:
    """What the engine sends: token n is pool event n % 251, the answer's first content
    token (three quarters in) names the answer with id 7."""
    ids = [1000 + n % POOL for n in range(TOKENS)]
    ids[TOKENS * 3 // 4] = 7
    return ids


@pytest.fixture
def full_pace(monkeypatch) -> None:
    """Pauses as long as with a thousand streams open, for the one stream a test reads."""
    monkeypatch.setattr(stream_pace, "FULL_PACE_STREAMS", 1)


def test_a_slow_stream_is_read_several_events_a_read_and_every_token_once(reads, full_pace):
    # 0.5 s of stall timeout: a pause is at most a quarter of it, so no silence is invented
    with paced_engine() as url:
        answer = chat(url, stall=0.5)
    choice = answer["choices"][0]
    assert list(choice["token_ids"]) == expected_ids()
    assert answer["usage"]["completion_tokens"] == TOKENS
    assert choice["message"]["content"].startswith("Answer ")
    # read as they came, 200 events paced 10 ms apart take ~200 reads; paused, far fewer
    events = sum(reads)
    assert events == TOKENS + 4  # the prompt's chunk, the tokens, the finish, usage, [DONE]
    assert len(reads) < events / 2


def test_a_paused_stream_still_finds_a_real_stall(reads, full_pace):
    # every answer stops sending at its 120th token for a minute: the stall timer cuts it
    held = paced_engine("--hold-at", "120", "--hold-s", "60")
    with held as url, pytest.raises(RequestTimeout, match="stalled"):
        chat(url, stall=0.5)
    assert sum(reads) == 121  # every event the server sent was read before the cut
    assert len(reads) < 121 / 2  # and it was read paused


def test_a_lone_stream_is_read_as_it_comes(reads):
    # one stream costs little CPU read event by event, and its end is seen at once
    with paced_engine() as url:
        answer = chat(url, stall=0.5)
    assert list(answer["choices"][0]["token_ids"]) == expected_ids()
    assert len(reads) > sum(reads) / 2
    assert stream_pace.ReadPacer.open_streams == 0  # every stream closed its pacer
