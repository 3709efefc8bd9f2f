"""Agent traces regenerated with --regenerate-turns all: tool results that answer the calls
the target made, a trace that ends where its calls leave the dataset's, --tool-divergence
splice, the reasoning of earlier turns sent as each engine reads it, and a tool server run
as a real process (examples/tool_server.py)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import assert_exactly_once, read_lines, run
from regen.cli import main
from regen.fleet.dispatch import HealthPolicy, RetryPolicy
from regen.fleet.embedded import free_port
from regen.testing.fake_server import Behaviour
from regen.testing.fake_tools import tool_caller
from regen.tool_trace import trace_faults
from test_kill9 import regen_command
from waiting import wait_until

EXAMPLE = Path(__file__).parent.parent / "examples" / "tool_server.py"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def weather_trace(pid: str, asked: str) -> dict:
    """user asks about `asked` -> the dataset called get_weather(Paris) as call_orig -> its
    result; the target's answer comes next."""
    call = {
        "id": "call_orig",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    return {
        "id": pid,
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": f"what is the weather in {asked}?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_orig", "content": "18C and sunny in Paris"},
        ],
    }


def write(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def by_id(output: Path) -> dict[str, dict]:
    return {r["id"]: r for r in read_lines(output, "completions")}


def test_a_matching_call_reuses_the_cached_result_under_the_new_id(tmp_path, fake_server):
    server = fake_server(answer=tool_caller())
    prompts = write(tmp_path / "p.jsonl", [weather_trace("same", "Paris")])
    run(prompts, tmp_path / "out", [server.url], regenerate_turns="all")
    record = by_id(tmp_path / "out")["same"]
    call, result, final = record["messages"][1:]
    assert call["tool_calls"][0]["id"] == "call_new_0"
    assert result == {
        "role": "tool",
        "tool_call_id": "call_new_0",
        "content": "18C and sunny in Paris",
    }
    assert final["content"] == "answer from tool: 18C and sunny in Paris"
    turns = record["meta"]["turns"]
    assert [t.get("tool_calls_match") for t in turns] == [True, None]
    assert turns[0]["tool_results"] == "cached"
    assert trace_faults(record["messages"]) == []
    # the second request carried the new id, never the dataset's
    assert server.requests[1]["messages"][2]["tool_call_id"] == "call_new_0"


def test_a_divergent_call_ends_the_trace_at_that_turn(tmp_path, fake_server):
    server = fake_server(answer=tool_caller())
    prompts = write(tmp_path / "p.jsonl", [weather_trace("other", "Lyon")])
    run(prompts, tmp_path / "out", [server.url], regenerate_turns="all")
    record = by_id(tmp_path / "out")["other"]
    assert [m["role"] for m in record["messages"]] == ["user", "assistant"]
    last = record["messages"][-1]
    assert orjson.loads(last["tool_calls"][0]["function"]["arguments"]) == {"city": "Lyon"}
    assert record["finish_reason"] == "tool_calls"
    (turn,) = record["meta"]["turns"]
    assert turn["tool_calls_match"] is False
    assert turn["trace_ended"] == "tool_calls_differ"
    assert len(server.requests) == 1  # nothing after it was sent
    assert "Paris" not in orjson.dumps(record["messages"]).decode()


def test_splice_keeps_going_with_the_cached_results_under_the_new_ids(tmp_path, fake_server):
    server = fake_server(answer=tool_caller())
    prompts = write(tmp_path / "p.jsonl", [weather_trace("other", "Lyon")])
    run(prompts, tmp_path / "out", [server.url], regenerate_turns="all", tool_divergence="splice")
    record = by_id(tmp_path / "out")["other"]
    result = record["messages"][2]
    assert result["tool_call_id"] == "call_new_0" == record["messages"][1]["tool_calls"][0]["id"]
    assert record["messages"][3]["content"] == "answer from tool: 18C and sunny in Paris"
    turns = record["meta"]["turns"]
    assert turns[0]["tool_calls_match"] is False and turns[0]["tool_results"] == "spliced"
    assert trace_faults(record["messages"]) == []


def test_reasoning_of_earlier_turns_goes_back_as_each_engine_reads_it(tmp_path, fake_server):
    sent = {}
    for dialect in ("vllm", "sglang", None):
        server = fake_server(answer=tool_caller(), dialect=dialect, reasoning="split")
        prompts = write(tmp_path / f"{dialect}.jsonl", [weather_trace("same", "Paris")])
        run(prompts, tmp_path / f"out-{dialect}", [server.url], regenerate_turns="all")
        sent[dialect] = server.requests[1]["messages"][1]
        stored = by_id(tmp_path / f"out-{dialect}")["same"]["messages"][1]
        assert stored["reasoning_content"] == "thinking about: "  # stored as regen keeps it
    assert (
        sent["vllm"]["reasoning"] == "thinking about: " and "reasoning_content" not in sent["vllm"]
    )
    assert (
        sent["sglang"]["reasoning_content"] == "thinking about: "
        and "reasoning" not in sent["sglang"]
    )
    # an engine regen cannot name gets none: a strict server would refuse the field
    assert "reasoning" not in sent[None] and "reasoning_content" not in sent[None]


@pytest.fixture
def example_tool_server():
    """examples/tool_server.py as its own process on a free port, stopped by pid."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/call"
    try:
        wait_until_listening(port, process)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=10)


def wait_until_listening(port: int, process: subprocess.Popen, timeout: float = 20) -> None:
    def listening() -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
        except urllib.error.HTTPError:
            return True  # it answers (404 for GET /): listening
        except OSError:
            return False
        return True

    wait_until(listening, timeout, f"the example tool server listening on {port}", alive=process)


def test_the_tool_server_answers_every_call_of_a_regenerated_turn(
    tmp_path, fake_server, example_tool_server
):
    url, _ = example_tool_server
    server = fake_server(answer=tool_caller())
    rows = [weather_trace("lyon", "Lyon"), weather_trace("paris", "Paris")]
    prompts = write(tmp_path / "p.jsonl", rows)
    run(prompts, tmp_path / "out", [server.url], regenerate_turns="all", tool_server=url)
    completions, _ = assert_exactly_once(tmp_path / "out", ["lyon", "paris"])
    record = by_id(tmp_path / "out")["lyon"]
    result = record["messages"][2]
    assert result["tool_call_id"] == "call_new_0"
    assert result["content"] == "14C and cloudy in Lyon"  # the sandbox's answer, not Paris'
    assert record["messages"][3]["content"] == "answer from tool: 14C and cloudy in Lyon"
    first = record["meta"]["turns"][0]
    assert (first["tool_calls_match"], first["tool_results"]) == (False, "tool_server")
    assert all(trace_faults(r["messages"]) == [] for r in completions)


def test_a_down_tool_server_stops_the_run_without_writing_errors(tmp_path, fake_server):
    server = fake_server(answer=tool_caller())
    prompts = write(tmp_path / "p.jsonl", [weather_trace(f"t{i}", "Lyon") for i in range(3)])
    down = f"http://127.0.0.1:{free_port()}/call"  # nothing listens there
    result = run(
        prompts,
        tmp_path / "out",
        [server.url],
        regenerate_turns="all",
        tool_server=down,
        health=HealthPolicy(give_up_after=1.0),
    )
    assert result.exit_code == 5
    assert read_lines(tmp_path / "out", "errors") == []
    assert read_lines(tmp_path / "out", "completions") == []


def test_status_counts_the_divergent_traces_per_source(tmp_path, fake_server):
    server = fake_server(answer=tool_caller())
    rows = [
        weather_trace("same", "Paris"),
        weather_trace("other", "Lyon"),
        {**weather_trace("web", "Rome"), "source": {"name": "web"}},
    ]
    rows[0]["source"] = rows[1]["source"] = {"name": "agents"}
    prompts = write(tmp_path / "p.jsonl", rows)
    run(prompts, tmp_path / "out", [server.url], regenerate_turns="all")
    shown = CliRunner().invoke(main, ["status", str(tmp_path / "out")])
    assert shown.exit_code == 0, shown.output
    counted = "tool calls that differ from the dataset's (this session): agents 1 of 2, web 1 of 1"
    assert counted in shown.output


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
    final = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert final.returncode == 0, final.stderr
    assert kills >= 2, "the run finished before it could be killed often enough"
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors
    for record in completions:
        assert trace_faults(record["messages"]) == []
        city = orjson.loads(record["messages"][1]["tool_calls"][0]["function"]["arguments"])
        assert record["messages"][2]["content"].endswith(f" in {city['city']}")


def test_the_tool_server_lets_the_target_go_on_past_the_dataset(
    tmp_path, fake_server, example_tool_server
):
    """A turn that calls tools where the dataset's answered (here the last one) gets its
    results and another turn; a call the tool refuses is answered with its error."""
    url, _ = example_tool_server
    plain = fake_server(answer=tool_caller())
    wrong = fake_server(answer=tool_caller(arguments=lambda text: {"town": "Lyon"}))
    for name, server in (("plain", plain), ("wrong", wrong)):
        # a prompt id per run: the example server answers a call it has seen as it did
        prompt = {
            "id": name,
            "tools": TOOLS,
            "messages": [{"role": "user", "content": "what is the weather in Lyon?"}],
        }
        prompts = write(tmp_path / f"{name}.jsonl", [prompt])
        run(prompts, tmp_path / name, [server.url], regenerate_turns="all", tool_server=url)
    record = by_id(tmp_path / "plain")["plain"]
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert record["messages"][3]["content"] == "answer from tool: 14C and cloudy in Lyon"
    assert [t.get("agent_step") for t in record["meta"]["turns"]] == [None, 1]
    refused = by_id(tmp_path / "wrong")["wrong"]["messages"][2]["content"]
    assert "unexpected keyword argument 'town'" in refused


def test_a_tool_server_that_breaks_the_contract_stops_the_run(
    tmp_path, fake_server, example_tool_server
):
    url, _ = example_tool_server
    server = fake_server(answer=tool_caller())
    prompts = write(tmp_path / "p.jsonl", [weather_trace("x", "Lyon")])
    wrong_path = url.replace("/call", "/nothing-here")  # 404: every call alike
    result = run(
        prompts, tmp_path / "out", [server.url], regenerate_turns="all", tool_server=wrong_path
    )
    assert result.exit_code == 5
    assert "tool server" in result.message and "refused a call" in result.message
    assert read_lines(tmp_path / "out", "errors") == []


def test_calls_without_ids_get_ids_their_results_name(tmp_path, fake_server):
    def no_ids(body):
        answer = tool_caller()(body)
        for call in answer.get("tool_calls") or []:
            del call["id"]
        return answer

    server = fake_server(answer=no_ids)
    prompts = write(tmp_path / "p.jsonl", [weather_trace("same", "Paris")])
    run(prompts, tmp_path / "out", [server.url], regenerate_turns="all")
    messages = by_id(tmp_path / "out")["same"]["messages"]
    assert messages[2]["tool_call_id"] == messages[1]["tool_calls"][0]["id"] == "call_1_0"
    assert trace_faults(messages) == []


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


def test_a_tool_server_that_comes_back_finds_the_calls_waiting(tmp_path, fake_server):
    """Down at the start, up a second later: the calls wait for it and every trace ends
    whole, none in errors/ (as requests wait for a fleet that comes back)."""
    server = fake_server(answer=tool_caller())
    ids = [f"w{i}" for i in range(4)]
    prompts = write(tmp_path / "p.jsonl", [weather_trace(pid, "Lyon") for pid in ids])
    port = free_port()
    started: list[subprocess.Popen] = []

    def bring_up() -> None:
        command = [sys.executable, str(EXAMPLE), "--port", str(port)]
        started.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))

    timer = threading.Timer(1.0, bring_up)
    timer.start()
    try:
        result = run(
            prompts,
            tmp_path / "out",
            [server.url],
            regenerate_turns="all",
            tool_server=f"http://127.0.0.1:{port}/call",
        )
    finally:
        timer.join()
        for process in started:
            process.terminate()
            process.wait(timeout=10)
    assert result.exit_code == 0, result.message
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors and all(
        r["messages"][2]["content"] == "14C and cloudy in Lyon" for r in completions
    )
    assert any("tool server" in e and "does not answer" in e for e in result.stats.events)


def test_the_shipped_tool_calling_stand_in_shows_the_tool_paths(tmp_path, example_tool_server):
    """docs/generate.md's commands: `fake_server --tool-caller` as its own process and the
    example tool server, on the walkthrough's prompts. Every trace goes on past its first
    turn on the tool server's results (the embedded model would end each there), whole."""
    url, _ = example_tool_server
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "regen.testing.fake_server",
        "--port",
        str(port),
        "--tool-caller",
    ]
    stand_in = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until_listening(port, stand_in)
        prompts, out = tmp_path / "work" / "prompts.jsonl", tmp_path / "work" / "agents"
        recipe = str(EXAMPLE.parent / "recipe.yaml")
        for argv in (
            ["prepare", recipe, "--output", str(prompts)],
            [
                "generate",
                "--prompts",
                str(prompts),
                "--output-dir",
                str(out),
                "--servers",
                f"http://127.0.0.1:{port}",
                "--regenerate-turns",
                "all",
                "--tool-server",
                url,
                "--display",
                "none",
            ],
        ):
            result = CliRunner().invoke(main, argv)
            assert result.exit_code == 0, result.output
    finally:
        stand_in.terminate()
        stand_in.wait(timeout=10)
    shown = CliRunner().invoke(main, ["status", str(out)])
    assert (
        "tool calls that differ from the dataset's (this session): agent 5 of 5, "
        "hermes_fc 1 of 1, infinity 1 of 1, traces 1 of 1"
    ) in shown.output
    records = read_lines(out, "completions")
    assert len(records) == 20 and all(trace_faults(r["messages"]) == [] for r in records)
    traces = [r for r in records if r["meta"]["turns"][0].get("tool_calls_match") is False]
    assert len(traces) == 8
    assert all(r["meta"]["turns"][0]["tool_results"] == "tool_server" for r in traces)
    assert not any(t.get("trace_ended") for r in records for t in r["meta"]["turns"])
