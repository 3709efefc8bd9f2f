"""A prompt file with tools on a fleet that cannot answer them: vLLM started without
--enable-auto-tool-choice answers every such request with HTTP 400, SGLang without
--tool-call-parser returns the calls as text. The run refuses at start with the fix, instead
of filling errors/ (or the answers) prompt by prompt; a file without tools, or a fleet with
a parser, runs as ever. The engines are the fake server in their dialects (the real vLLM's
side: tests/test_tools_vllm.py)."""

from __future__ import annotations

import orjson
import pytest

from gen_helpers import read_lines, run, write_prompts
from regen.errors import ConfigError
from regen.testing.fake_behaviour import Behaviour

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def prompts_with_tools(path, plain: int, with_tools: int) -> None:
    """`plain` prompts, then `with_tools` prompts that offer a tool."""
    write_prompts(path, plain)
    with open(path, "ab") as fh:
        for i in range(with_tools):
            row = {"id": f"t{i}", "messages": [{"role": "user", "content": "Weather in Oslo?"}]}
            fh.write(orjson.dumps({**row, "tools": [WEATHER]}) + b"\n")


@pytest.mark.parametrize(
    ("dialect", "said"),
    [
        ("vllm", '"auto" tool choice requires --enable-auto-tool-choice'),
        ("sglang", "SGLang runs without --tool-call-parser"),
    ],
)
def test_tools_on_a_fleet_without_a_parser_are_refused_at_start(
    tmp_path, fake_server, dialect, said
):
    server = fake_server(Behaviour(dialect=dialect, tool_parser=False))
    prompts_with_tools(tmp_path / "p.jsonl", plain=3, with_tools=2)
    with pytest.raises(ConfigError) as err:
        run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    assert "line 4 holds one" in err.value.message
    assert f"{server.url}: " in err.value.message and said in err.value.message
    assert "--tool-call-parser NAME" in err.value.hint
    assert server.served == 0  # nothing was generated: no prompt became an error record


def test_tools_past_the_first_lines_stop_the_run_before_any_is_sent(
    tmp_path, fake_server, monkeypatch
):
    """The preflight reads the file's first lines; a prompt with tools further on is held
    at the gate: the plain prompts before it are answered, it and the rest stay unsent
    (a rerun on a fixed fleet sends them), and the run ends with the fix, exit 2."""
    monkeypatch.setattr("regen.run.tool_prompts.HEAD_LINES", 5)
    server = fake_server(Behaviour(dialect="vllm", tool_parser=False, seconds_per_token=0.01))
    prompts_with_tools(tmp_path / "p.jsonl", plain=8, with_tools=3)
    with pytest.raises(ConfigError, match="line 9 holds one") as err:
        run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], concurrency=1)
    assert err.value.exit_code == 2
    done = {r["id"] for r in read_lines(tmp_path / "out", "completions")}
    assert done and done <= {f"p{i:05d}" for i in range(8)}  # a plain one halted stays pending
    assert not read_lines(tmp_path / "out", "errors")
    probes = [r for r in server.requests if r.get("tools")]
    assert len(probes) == 1 and probes[0]["max_tokens"] == 1  # asked once, sent none


@pytest.mark.parametrize("dialect", ["vllm", "sglang"])
def test_a_fleet_with_a_parser_answers_the_tools(tmp_path, fake_server, dialect):
    server = fake_server(Behaviour(dialect=dialect))
    prompts_with_tools(tmp_path / "p.jsonl", plain=2, with_tools=2)
    assert run(tmp_path / "p.jsonl", tmp_path / "out", [server.url]).exit_code == 0
    assert len(read_lines(tmp_path / "out", "completions")) == 4
    assert not read_lines(tmp_path / "out", "errors")


def test_a_file_without_tools_costs_no_request(tmp_path, fake_server):
    """A plain file on a fleet without a parser runs as it always did: nobody is asked."""
    server = fake_server(Behaviour(dialect="vllm", tool_parser=False))
    write_prompts(tmp_path / "p.jsonl", 3)
    assert run(tmp_path / "p.jsonl", tmp_path / "out", [server.url]).exit_code == 0
    assert len(server.requests) == 3 and not any("tools" in r for r in server.requests)
