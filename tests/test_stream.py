"""--stream: the same records as without it, and a stalled response is cut and retried."""

from __future__ import annotations

import time

import pytest

from gen_helpers import assert_exactly_once, read_lines, run, write_prompts
from regen.fleet.server import Timeouts
from regen.testing.fake_server import echo_answer

DIALECTS = [None, "sglang", "vllm", "llamacpp"]  # the plain fake, then each engine's wording
STREAM = Timeouts(request=30, connect=2, stall=0.5, stream=True)
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "lookup", "arguments": '{"q": "weather in Paris"}'},
}


def with_tool_call(body):
    return {**echo_answer(body), "tool_calls": [CALL]}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_streamed_records_match_non_streamed_ones(tmp_path, fake_server, dialect):
    server = fake_server(reasoning="split", answer=with_tool_call, dialect=dialect)
    ids = write_prompts(tmp_path / "p.jsonl", 5)
    run(tmp_path / "p.jsonl", tmp_path / "plain", [server.url])
    run(tmp_path / "p.jsonl", tmp_path / "streamed", [server.url], timeouts=STREAM)
    assert all(body.get("stream") for body in server.requests[5:])
    plain = {r["id"]: r for r in read_lines(tmp_path / "plain", "completions")}
    streamed, _ = assert_exactly_once(tmp_path / "streamed", ids)
    for record in streamed:
        expected = plain[record["id"]]
        assert record["messages"] == expected["messages"]
        assert record["messages"][-1]["tool_calls"] == [CALL]
        assert record["usage"] == expected["usage"]
        assert record["finish_reason"] == expected["finish_reason"] == "stop"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_inline_think_is_split_from_a_stream_too(tmp_path, fake_server, dialect):
    server = fake_server(reasoning="inline", dialect=dialect)
    write_prompts(tmp_path / "p.jsonl", 2)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], timeouts=STREAM)
    for record in read_lines(tmp_path / "out", "completions"):
        assert record["messages"][-1]["reasoning_content"].startswith("thinking about")
        assert record["messages"][-1]["content"].startswith("answer to:")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_stalled_stream_is_cut_and_retried(tmp_path, fake_server, dialect):
    server = fake_server(faults=["stall"] + ["ok"] * 20, dialect=dialect)
    ids = write_prompts(tmp_path / "p.jsonl", 6)
    # A whole request may take 10 minutes: only the stall timer (0.5 s of silence) can cut
    # the stalled one in a time this test waits for (a loaded machine gets 2 minutes).
    patient = Timeouts(request=600, connect=2, stall=0.5, stream=True)
    started = time.monotonic()
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], timeouts=patient)
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors and result.exit_code == 0
    assert any(r["meta"]["attempts"] == 2 for r in completions)
    assert time.monotonic() - started < 120


@pytest.mark.parametrize("write_size", [3, 50])
def test_a_stream_cut_anywhere_by_the_socket_reads_the_same(tmp_path, fake_server, write_size):
    """Events split across reads (3-byte writes) or several in one read: the same records,
    ids and all, as the server's non-streamed answers."""
    plain_server = fake_server(reasoning="split", answer=with_tool_call, dialect="vllm")
    server = fake_server(
        reasoning="split", answer=with_tool_call, dialect="vllm", stream_write_size=write_size
    )
    ids = write_prompts(tmp_path / "p.jsonl", 4)
    run(tmp_path / "p.jsonl", tmp_path / "plain", [plain_server.url], return_token_ids=True)
    run(
        tmp_path / "p.jsonl",
        tmp_path / "streamed",
        [server.url],
        timeouts=STREAM,
        return_token_ids=True,
    )
    plain = {r["id"]: r for r in read_lines(tmp_path / "plain", "completions")}
    streamed, errors = assert_exactly_once(tmp_path / "streamed", ids)
    assert not errors
    for record in streamed:
        expected = plain[record["id"]]
        assert record["messages"] == expected["messages"]
        assert record["token_ids"] == expected["token_ids"]
        assert record["token_ids"]["completion"] == [*range(100, 108)]
