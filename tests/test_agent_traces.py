"""Agent traces regenerated with --regenerate-turns all: tool results that answer the calls
the target made, a trace that ends where its calls leave the dataset's, --tool-divergence
splice, the reasoning of earlier turns sent as each engine reads it, calls without ids, and
the divergent traces `regen status` counts. With a live tool server: test_tool_server.py."""

from __future__ import annotations

import orjson
from click.testing import CliRunner

from gen_helpers import run
from regen.cli import main
from regen.fleet.preflight import PROBE_TOOL
from regen.testing.fake_tools import tool_caller
from regen.tool_trace import trace_faults
from trace_helpers import by_id, weather_trace, write


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
        # vLLM is asked first whether it answers tools (run/tool_prompts.py): one request
        requests = [r for r in server.requests if r.get("tools") != [PROBE_TOOL]]
        sent[dialect] = requests[1]["messages"][1]
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
