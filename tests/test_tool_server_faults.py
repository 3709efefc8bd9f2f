"""Agent traces with a live tool server under faults: kill -9 then resume, and faults on a
two-server fleet; every trace lands once and whole."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import orjson

from gen_helpers import assert_exactly_once, run
from regen.fleet.dispatch import RetryPolicy
from regen.testing.fake_server import Behaviour
from regen.testing.fake_tools import tool_caller
from regen.tool_trace import trace_faults
from test_kill9 import regen_command
from trace_helpers import example_tool_server as example_tool_server  # the fixture
from trace_helpers import weather_trace, write


def test_kill9_with_a_tool_server_then_resume_is_exactly_once_and_whole(
    tmp_path, fake_server, example_tool_server
):
    """`--regenerate-turns all --tool-server`, killed with SIGKILL at random moments and
    resumed: every trace is written once, whole, with the tool server's answers."""
    url, _ = example_tool_server
    slow = tool_caller()
    server = fake_server(
        Behaviour(slots=8, seconds_per_token=0.02, answer=lambda b: {**slow(b), "tokens": 6})
    )
    n = 200
    ids = [f"t{i:03d}" for i in range(n)]
    write(tmp_path / "p.jsonl", [weather_trace(pid, f"City{i % 7}") for i, pid in enumerate(ids)])
    command = [
        *regen_command(tmp_path / "p.jsonl", tmp_path / "out", server.url),
        "--regenerate-turns",
        "all",
        "--tool-server",
        url,
    ]
    rng, kills = random.Random(33), 0
    for _ in range(4):
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            time.sleep(rng.uniform(1.0, 2.0))  # the kill at a random moment is the test
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
    server.behaviour.seconds_per_token = 0.001  # slow for the kills to land mid-run; no more
    final = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert final.returncode == 0, final.stderr
    assert kills >= 2, "the run finished before it could be killed often enough"
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors
    for record in completions:
        assert trace_faults(record["messages"]) == []
        city = orjson.loads(record["messages"][1]["tool_calls"][0]["function"]["arguments"])
        assert record["messages"][2]["content"].endswith(f" in {city['city']}")


def test_faults_on_a_two_server_fleet_leave_every_trace_once_and_whole(
    tmp_path, fake_server, example_tool_server
):
    """5xx, 429, resets and cut-short answers on the fleet, with a tool server: every trace
    is written once, whole, and no fault of the fleet becomes an error row."""
    url, _ = example_tool_server
    faults = ["ok", "500", "ok", "reset", "429", "ok", "abort", "ok"]
    servers = [
        fake_server(
            answer=tool_caller(), faults=faults, retry_after=0.05, dialect="vllm", reasoning="split"
        )
        for _ in range(2)
    ]
    ids = [f"f{i:02d}" for i in range(30)]
    rows = [weather_trace(pid, ("Paris", "Lyon")[i % 2]) for i, pid in enumerate(ids)]
    prompts = write(tmp_path / "p.jsonl", rows)
    retry = RetryPolicy(max_retries=12, base_delay=0.01, max_delay=0.05)  # faults, not prompts
    result = run(
        prompts,
        tmp_path / "out",
        [s.url for s in servers],
        regenerate_turns="all",
        tool_server=url,
        retry=retry,
    )
    assert result.exit_code == 0, result.message
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors
    assert all(trace_faults(r["messages"]) == [] for r in completions)
    assert all(r["messages"][-1]["content"].startswith("answer from tool") for r in completions)
