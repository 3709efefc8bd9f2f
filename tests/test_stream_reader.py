"""The stream reader on its own: the same answer however the socket cuts the bytes and however
many tokens an event carries, a few bytes a token while it grows, and every fault reported."""

from __future__ import annotations

import random
import subprocess
import sys
import tracemalloc
import urllib.request

import orjson
import pytest

from gen_helpers import assert_exactly_once, run, write_prompts
from regen.errors import Overloaded, ServerFault, TransportError
from regen.fleet.embedded import free_port
from regen.fleet.server import Timeouts
from regen.fleet.stream import StreamAccumulator
from waiting import wait_until

PIECES = ["Hé", "llo", " wörld", " 🙂", "\n", " the", " end"]  # multi-byte, emoji, newline


def events(tokens: int, per_event: int, crlf: bool = False) -> tuple[bytes, list[int], str]:
    """A vLLM-shaped stream: reasoning then content, `per_event` tokens an event (several,
    as with speculative decoding), ids per chunk, usage at the end; its ids and its text."""
    end = b"\r\n" if crlf else b"\n"
    out, ids, text = [], [], []
    first = {"choices": [{"index": 0, "delta": {"role": "assistant"}}], "prompt_token_ids": [1, 2]}
    out.append(first)
    for start in range(0, tokens, per_event):
        chunk_ids = list(range(start, min(tokens, start + per_event)))
        piece = "".join(PIECES[i % len(PIECES)] for i in chunk_ids)
        field = "reasoning_content" if start < tokens // 2 else "content"
        if field == "content":
            text.append(piece)
        delta = {field: piece}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        out.append({"id": "c", "model": "m", "choices": [{**choice, "token_ids": chunk_ids}]})
        ids += chunk_ids
    out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "token_ids": []}]})
    out.append({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": tokens}})
    lines = [b"data: " + orjson.dumps(e) + end + end for e in out]
    lines.insert(1, b": keep-alive" + end + end)
    return b"".join(lines) + b"data: [DONE]" + end + end, ids, "".join(text)


def read(stream: bytes, cuts: list[int]) -> dict:
    reader = StreamAccumulator("s")
    last = 0
    for cut in [*cuts, len(stream)]:
        reader.feed_bytes(stream[last:cut])
        last = cut
    reader.end()
    return reader.response()


@pytest.mark.parametrize("per_event", [1, 3, 8])
@pytest.mark.parametrize("crlf", [False, True])
def test_any_cut_of_the_bytes_reads_the_same_answer(per_event, crlf):
    stream, ids, text = events(200, per_event, crlf)
    rng = random.Random(per_event)
    cuttings = {
        "whole": [],
        "every byte": list(range(1, len(stream))),
        "random": sorted(rng.sample(range(1, len(stream)), 300)),
        "mid-character": [i for i in range(1, len(stream)) if stream[i] & 0xC0 == 0x80][:50],
    }
    for name, cuts in cuttings.items():
        data = read(stream, cuts)
        choice = data["choices"][0]
        assert list(choice["token_ids"]) == ids, name
        assert choice["message"]["content"] == text, name
        assert choice["finish_reason"] == "stop", name
        assert data["prompt_token_ids"] == [1, 2]
        assert data["usage"]["completion_tokens"] == 200


def test_a_last_line_without_its_newline_still_counts():
    stream, _, text = events(10, 1)
    cut = stream.rstrip(b"\n")
    assert cut.endswith(b"[DONE]")
    reader = StreamAccumulator("s")
    reader.feed_bytes(cut)
    assert not reader.done
    reader.end()
    assert reader.done and reader.response()["choices"][0]["message"]["content"] == text


def test_an_answer_in_flight_holds_a_few_bytes_a_token():
    """8,192 answers of 16K tokens in flight: a Python list of ints and of text pieces would
    hold over 60 bytes a token; ids and text are kept as plain bytes instead."""
    stream, _, _ = events(16_000, 1)
    body = stream[: stream.index(b'"finish_reason":"stop"')]
    body = body[: body.rindex(b"\n\n") + 2]  # every token event, not the end
    reader = StreamAccumulator("s")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for start in range(0, len(body), 4096):
            reader.feed_bytes(body[start : start + 4096])
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(reader.token_ids) == 16_000
    assert held / 16_000 < 16, f"{held / 16_000:.1f} bytes a token"


def test_an_error_event_midway_is_the_error_it_names():
    stream, _, _ = events(20, 1)
    error = {"error": {"message": "overloaded", "type": "ServiceUnavailable", "code": 503}}
    half = stream.index(b"data:", len(stream) // 2)
    broken = stream[:half] + b"data: " + orjson.dumps(error) + b"\n\ndata: [DONE]\n\n"
    with pytest.raises(Overloaded, match="overloaded"):
        read(broken, list(range(7, len(broken), 7)))


@pytest.mark.parametrize(
    "event",
    [b"data: {not json}", b"data: [1, 2]", b'data: {"choices": [{"delta": {"content": 5}}]}'],
)
def test_an_event_that_is_no_chunk_is_a_server_fault(event):
    with pytest.raises(ServerFault, match="not a chat completion chunk"):
        read(event + b"\n\n", [])


def test_a_token_id_past_32_bits_is_a_server_fault():
    event = {"choices": [{"delta": {"content": "x"}, "token_ids": [2**40]}]}
    with pytest.raises(ServerFault, match="outside 32 bits"):
        read(b"data: " + orjson.dumps(event) + b"\n\n", [])


def test_a_stream_without_a_finish_reason_is_broken_off():
    stream, _, _ = events(10, 1)
    cut = stream[: stream.index(b'"finish_reason":"stop"')]
    cut = cut[: cut.rindex(b"\n\n") + 2]
    with pytest.raises(TransportError, match="ended early"):
        read(cut, [5, 50])


@pytest.fixture
def sse_fleet():
    """The benchmarks' streaming engines (regen.testing.sse_fleet) on two ports, 3 tokens an
    event (a speculating engine's chunks), HTTP chunked transfer; stopped by pid."""
    ports = [free_port(), free_port()]
    args = [
        "--ports",
        *map(str, ports),
        "--tokens",
        "300",
        "--tokens-per-event",
        "3",
        "--events-per-write",
        "5",
    ]
    proc = subprocess.Popen([sys.executable, "-m", "regen.testing.sse_fleet", *args])
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for url in urls:
            wait_for(url)
        yield urls
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def wait_for(url: str) -> None:
    def up() -> bool:
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=1).close()
        except OSError:
            return False
        return True

    wait_until(up, 10, f"{url} answering /v1/models")


def test_a_run_reads_every_token_of_a_speculating_engines_stream(tmp_path, sse_fleet):
    ids = write_prompts(tmp_path / "p.jsonl", 6)
    timeouts = Timeouts(request=60, connect=5, stall=10, stream=True)
    result = run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        sse_fleet,
        timeouts=timeouts,
        return_token_ids=True,
    )
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert result.exit_code == 0 and not errors
    for record in completions:
        answer = record["messages"][-1]
        assert len(record["token_ids"]["completion"]) == 300 == record["usage"]["completion_tokens"]
        assert record["token_ids"]["prompt"] == list(range(16))
        assert answer["content"].startswith("Answer ") and "🙂" in answer["reasoning_content"]
