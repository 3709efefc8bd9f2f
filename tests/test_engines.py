"""What SGLang, vLLM and llama.cpp actually send (the fake server's dialects): an answer cut
short is never stored as finished, token ids work on both GPU engines, keep-alive comments
do not hide a stall."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from gen_helpers import assert_exactly_once, read_lines, run, write_prompts
from regen.cli.status import render
from regen.errors import ConfigError, RequestTimeout
from regen.fleet.policy import RetryPolicy
from regen.fleet.server import Server, Timeouts
from regen.format.layout import OutputLayout
from regen.run.config import Sampling
from regen.run.status import read_status
from regen.testing.fake_server import echo_answer

DIALECTS = ["sglang", "vllm", "llamacpp"]
STREAM = Timeouts(request=30, connect=2, stall=0.5, stream=True)
# With every third request failing, one prompt's retries can each land on a failing one:
# in CI a prompt failed all 4 attempts --max-retries 3 gives. A 9-prompt run has exactly 5
# failures (F of its 9 + F requests, every third one), so 5 retries always end in an answer:
# the default's count, with the fast backoff of the fault tests.
EVERY_THIRD = RetryPolicy(max_retries=5, base_delay=0.05, max_delay=0.3)


def full_answers(completions: list[dict]) -> None:
    for record in completions:
        assert record["messages"][-1]["content"] == f"answer to: question {record['id']}"
        assert record["finish_reason"] == "stop"


def servers_in_progress(out) -> list[dict]:
    progress = json.loads(OutputLayout.at(out).progress.read_text())
    return progress["servers"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_error_event_inside_a_stream_is_retried_not_stored(tmp_path, fake_server, dialect):
    server = fake_server(dialect=dialect, faults=["stream_error", "ok", "ok"])
    ids = write_prompts(tmp_path / "p.jsonl", 9)
    out = tmp_path / "out"
    result = run(tmp_path / "p.jsonl", out, [server.url], timeouts=STREAM, retry=EVERY_THIRD)
    completions, errors = assert_exactly_once(out, ids)
    assert not errors and result.exit_code == 0
    full_answers(completions)
    assert any(r["meta"]["attempts"] > 1 for r in completions)


def test_a_stream_ending_with_done_but_no_finish_reason_is_retried(tmp_path, fake_server):
    server = fake_server(dialect="vllm", faults=["done_early", "ok"])
    ids = write_prompts(tmp_path / "p.jsonl", 6)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], timeouts=STREAM)
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors
    full_answers(completions)


@pytest.mark.parametrize(
    ("dialect", "fault"), [("sglang", "abort"), ("vllm", "abort"), ("vllm", "finish_error")]
)
@pytest.mark.parametrize("stream", [False, True])
def test_an_aborted_answer_is_retried_and_counted(tmp_path, fake_server, dialect, fault, stream):
    server = fake_server(dialect=dialect, faults=[fault, "ok", "ok"])
    ids = write_prompts(tmp_path / "p.jsonl", 9)
    timeouts = STREAM if stream else Timeouts(request=10, connect=2)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], timeouts=timeouts, retry=EVERY_THIRD)
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors
    full_answers(completions)
    (snap,) = servers_in_progress(tmp_path / "out")
    aborts = -(-len(server.requests) // 3)  # every third request, retries included
    assert snap["aborted"] == aborts >= 3 and "EngineAborted" in snap["last_error"]
    shown = render(read_status(str(tmp_path / "out")))
    assert any(f"({aborts} aborted by the engine)" in line for line in shown)


@pytest.mark.parametrize("dialect", ["sglang", "vllm"])
def test_token_ids_are_stored_from_either_engine(tmp_path, fake_server, dialect):
    server = fake_server(dialect=dialect)
    ids = write_prompts(tmp_path / "p.jsonl", 3)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], return_token_ids=True)
    assert result.exit_code == 0
    completions, _ = assert_exactly_once(tmp_path / "out", ids)
    for record in completions:
        assert record["token_ids"] == {"prompt": list(range(10)), "completion": [*range(100, 108)]}


def test_token_ids_are_gathered_from_a_vllm_stream(tmp_path, fake_server):
    server = fake_server(dialect="vllm")
    ids = write_prompts(tmp_path / "p.jsonl", 3)
    run(
        tmp_path / "p.jsonl", tmp_path / "out", [server.url], return_token_ids=True, timeouts=STREAM
    )
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors
    for record in completions:
        assert record["token_ids"] == {"prompt": list(range(10)), "completion": [*range(100, 108)]}


def test_sglang_refusing_streamed_token_ids_stops_at_preflight_with_the_fix(tmp_path, fake_server):
    server = fake_server(dialect="sglang")
    write_prompts(tmp_path / "p.jsonl", 3)
    with pytest.raises(ConfigError) as caught:
        run(
            tmp_path / "p.jsonl",
            tmp_path / "out",
            [server.url],
            return_token_ids=True,
            timeouts=STREAM,
        )
    assert "--stream with --return-token-ids" in caught.value.message
    assert "\n" not in caught.value.message
    assert "drop --stream" in (caught.value.hint or "")


def test_keep_alive_comments_do_not_hide_a_stalled_stream(fake_server):
    """vLLM's --sse-keep-alive-interval sends comments while the engine hangs: only data
    events count as progress, so the stall timeout still cuts it."""
    server = fake_server(dialect="vllm", faults=["stall"], keep_alive=0.05)
    timeouts = Timeouts(request=600, connect=2, stall=0.4, stream=True)

    async def ask() -> None:
        s = Server(server.url, 1, timeouts=timeouts)
        body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
        try:  # the outer bound only keeps a broken build from hanging the suite
            await asyncio.wait_for(s.chat(body), timeout=20)
        finally:
            await s.close()

    with pytest.raises(RequestTimeout, match="stalled"):
        asyncio.run(ask())


def chaos_faults(dialect: str) -> list[str]:
    """Per 50 requests: 2 in-stream errors (4%), 2 aborts (4%), 1 stream without a finish
    reason; the rest answer."""
    aborts = ["abort", "finish_error"] if dialect == "vllm" else ["abort", "abort"]
    faults = ["ok"] * 50
    for at, fault in zip(
        (7, 19, 23, 31, 44), ["stream_error", "stream_error", *aborts, "done_early"], strict=True
    ):
        faults[at] = fault
    return faults


@pytest.mark.parametrize("dialect", DIALECTS)
def test_chaos_with_kill9_and_stream_ends_exactly_once_with_full_answers(
    tmp_path, fake_server, dialect
):
    server = fake_server(
        dialect=dialect,
        faults=chaos_faults(dialect),
        slots=8,
        seconds_per_token=0.02,
        answer=lambda b: {**echo_answer(b), "tokens": 6},
    )
    n = 120
    ids = write_prompts(tmp_path / "p.jsonl", n)
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "--output-dir",
        str(out),
        "--servers",
        server.url,
        "--concurrency",
        "8",
        "--stream",
        "--stall-timeout",
        "5",
        "--display",
        "none",
    ]
    rng = random.Random(f"chaos-{dialect}")
    for _ in range(2):
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            time.sleep(rng.uniform(0.8, 1.4))  # the kill at a random moment is the test
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
    final = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    completions, errors = assert_exactly_once(out, ids)
    assert len(completions) == n and not errors
    full_answers(completions)
    played = [chaos_faults(dialect)[i % 50] for i in range(len(server.requests))]
    assert played.count("stream_error") >= 4 and played.count("abort") >= 2


@pytest.mark.parametrize(
    ("dialect", "deterministic", "honoured"),
    [("sglang", False, False), ("sglang", True, True), ("vllm", False, True)],
)
def test_records_name_the_engine_and_whether_the_seed_held(
    tmp_path, fake_server, dialect, deterministic, honoured
):
    server = fake_server(dialect=dialect, deterministic=deterministic)
    ids = write_prompts(tmp_path / "p.jsonl", 3)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], sampling=Sampling(seed=7))
    completions, _ = assert_exactly_once(tmp_path / "out", ids)
    version = {"sglang": "0.5.23", "vllm": "0.33.0"}[dialect]
    for record in completions:
        assert record["meta"]["engine"] == {"name": dialect, "version": version}
        assert record["meta"]["seed_honoured"] is honoured
    manifest = json.loads(OutputLayout.at(tmp_path / "out").manifest.read_text())
    assert manifest["config"]["engines"] == [
        {"name": dialect, "version": version, "seed_honoured": honoured}
    ]
    warnings = [e for e in result.stats.events if "--seed is ignored" in str(e)]
    assert len(warnings) == (0 if honoured else 1)


def test_a_server_that_names_no_engine_is_unknown_and_no_seed_no_claim(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 2)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    for record in read_lines(tmp_path / "out", "completions"):
        assert record["meta"]["engine"] == {"name": "unknown", "version": None}
        assert "seed_honoured" not in record["meta"]


@pytest.mark.parametrize("dialect", ["sglang", "vllm"])
def test_context_overflow_gives_the_same_data_on_either_engine(tmp_path, fake_server, dialect):
    """prompt (10) + max_tokens (4096) > context (100): vLLM lowers max_tokens itself, SGLang
    answers 400 and regen asks once more with max_tokens 90."""
    server = fake_server(dialect=dialect, context=100)
    ids = write_prompts(tmp_path / "p.jsonl", 3)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors
    full_answers(completions)
    lowered = {r["meta"].get("max_tokens_lowered_to") for r in completions}
    assert lowered == ({90} if dialect == "sglang" else {None})


@pytest.mark.parametrize("dialect", ["sglang", "vllm"])
def test_a_prompt_longer_than_the_context_stays_a_permanent_error(tmp_path, fake_server, dialect):
    server = fake_server(
        dialect=dialect, context=100, answer=lambda b: {**echo_answer(b), "prompt_tokens": 150}
    )
    ids = write_prompts(tmp_path / "p.jsonl", 2)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    _, errors = assert_exactly_once(tmp_path / "out", ids)
    assert len(errors) == 2 and all(e["error"]["status"] == 400 for e in errors)
    assert all(e["attempts"] == 1 for e in errors)
