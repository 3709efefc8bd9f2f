"""Agent traces regenerated against a live tool server: every call of a turn answered, the
target going on past the dataset, a server that is down, breaks the contract or comes
back, and the shipped tool-calling stand-in."""

from __future__ import annotations

import subprocess
import sys
import threading

from click.testing import CliRunner

from gen_helpers import assert_exactly_once, read_lines, run
from regen.cli import main
from regen.fleet.dispatch import HealthPolicy
from regen.fleet.embedded import free_port
from regen.testing.fake_tools import tool_caller
from regen.tool_trace import trace_faults
from trace_helpers import EXAMPLE, TOOLS, by_id, wait_until_listening, weather_trace, write
from trace_helpers import example_tool_server as example_tool_server  # the fixture


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
