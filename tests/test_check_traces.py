"""`check` finds broken agent traces (a rule in the verdict, with per-sample flags) and counts
per source the traces whose regenerated calls left the dataset's (`tool_divergence`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix
import pytest
from click.testing import CliRunner

from check_helpers import WEATHER, call, check, failed
from regen.cli import main
from regen.finished.encode import Encoder
from regen.finished.record import Completion
from regen.prepare.formats.function_calling import FunctionCalling
from regen.tool_trace import trace_faults
from test_prepare_traces import PARALLEL, hermes_calls, hermes_responses, hermes_row, prompt_of


def trace(cid: str, middle: list[dict], source: str = "agents", **meta) -> dict:
    """user -> (middle) -> final answer, as a completion of a run."""
    history = [{"role": "user", "content": "Weather in Paris?"}, *middle]
    answer = f"It is 18C in Paris, says trace {cid}."
    record = checkfix.completion(
        cid, answer, history=history, tools=[WEATHER], source=source, regenerated=2
    )
    for key, value in meta.items():
        record["meta"]["turns"][0] = {**record["meta"]["turns"][0], key: value}
    return record


def calling(cid: str = "c1", arguments: str = '{"city": "Paris"}') -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [call("get_weather", arguments, cid)]}


def result(cid: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": "18C"}


def test_broken_traces_fail_their_rule_with_per_sample_flags(tmp_path):
    whole = trace("whole", [calling("c1"), result("c1")])
    orphan = trace("orphan", [calling("c1"), result("call_orig")])  # the stale id
    unanswered = trace("unanswered", [calling("c1"), {"role": "user", "content": "and?"}])
    not_json = trace("not-json", [calling("c1", '{"city": "Par'), result("c1")])
    per_sample = tmp_path / "samples.jsonl"
    result_, report = check(
        tmp_path,
        [*checkfix.healthy(20), whole, orphan, unanswered, not_json],
        "--per-sample",
        str(per_sample),
    )
    assert failed(report) == {"broken_trace"} and result_.exit_code == 1
    flags = report["overall"]["flags"]
    assert flags["broken_trace"] == 3
    assert (
        flags["orphan_tool_result"],
        flags["unanswered_tool_call"],
        flags["tool_arguments_not_json"],
    ) == (1, 2, 1)
    # (the stale id also leaves c1 unanswered: two faults, one sample)
    rows = {r["id"]: r for r in map(json.loads, per_sample.read_text().splitlines())}
    assert "broken_trace" not in rows["whole"]["flags"]
    assert {"broken_trace", "orphan_tool_result"} <= set(rows["orphan"]["flags"])


def test_divergent_traces_are_counted_per_source_and_pass(tmp_path):
    diverged = trace(
        "d",
        [calling("c1")],
        source="agents",
        tool_calls_match=False,
        trace_ended="tool_calls_differ",
    )
    diverged["messages"] = diverged["messages"][:2]  # the trace ends on the divergent call
    diverged["meta"]["turns"] = diverged["meta"]["turns"][:1]
    matched = trace("m", [calling("c1"), result("c1")], source="agents", tool_calls_match=True)
    result_, report = check(tmp_path, [*checkfix.healthy(20), diverged, matched])
    assert result_.exit_code == 0, result_.output
    assert report["sources"]["agents"]["flags"]["tool_divergence"] == 1
    assert "tool_divergence" not in report["sources"]["web"]["flags"]
    assert "tool_divergence 1" in result_.output


def test_a_call_open_at_the_end_is_whole_and_a_stale_id_is_not():
    assert trace_faults([{"role": "user", "content": "q"}, calling("c1")]) == []
    stale = [{"role": "user", "content": "q"}, calling("c1"), result("old")]
    assert trace_faults(stale) == ["orphan_tool_result"]


def test_a_prompt_file_is_checked_for_broken_traces_without_a_tokenizer(tmp_path):
    whole = {
        "id": "whole",
        "source": {"name": "agents"},
        "messages": [{"role": "user", "content": "q"}, calling("c1"), result("c1")],
    }
    stale = {
        "id": "stale",
        "source": {"name": "agents"},
        "messages": [{"role": "user", "content": "q"}, calling("c1"), result("call_orig")],
    }
    plain = {
        "id": "plain",
        "source": {"name": "web"},
        "messages": [{"role": "user", "content": "hi"}],
    }
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in (whole, stale, plain)))
    out, samples = tmp_path / "r.json", tmp_path / "s.jsonl"
    shown = CliRunner().invoke(
        main, ["check", str(prompts), "--json", str(out), "--per-sample", str(samples)]
    )
    assert shown.exit_code == 1, shown.output
    assert "FAIL broken_trace" in shown.output and "source agents" in shown.output
    report = json.loads(out.read_text())
    assert report["broken"] == 1 and report["sources"]["agents"] == {"prompts": 2, "broken": 1}
    flags = {r["id"]: r["flags"] for r in map(json.loads, samples.read_text().splitlines())}
    assert flags["stale"][:2] == ["orphan_tool_result", "unanswered_tool_call"]
    assert flags["whole"] == [] == flags["plain"]
    off = CliRunner().invoke(main, ["check", str(prompts), "--max", "broken_trace=0.5"])
    assert off.exit_code == 0, off.output


@pytest.mark.parametrize("template", ["qwen", "smol"])
def test_split_parallel_results_reach_the_rendered_text_and_are_never_trained(template):
    """A Hermes turn answering three calls at once, as prepare splits it: every result is in
    the text check and export tokenise, in the calls' order, outside the loss mask."""
    calls, responses, expected = PARALLEL["three-named-out-of-order"]
    row = hermes_row(("gpt", hermes_calls(*calls)), ("tool", hermes_responses(*responses)))
    prompt = prompt_of(row, FunctionCalling)
    record = checkfix.completion(
        "p",
        "Paris 18C, Rome 21C, Oslo 9:00.",
        history=prompt.messages,
        tools=prompt.tools or [WEATHER],
        regenerated=2,
    )
    enc = Encoder.of(checkfix.load(template)).encode(Completion.of(record))
    where = [enc.text.find(f'"content": "{text}"') for text in expected]
    assert -1 not in where and where == sorted(where), enc.text
    trained = "".join(enc.text[enc.offsets[a][0] : enc.offsets[b - 1][1]] for a, b in enc.spans)
    assert "Rome 21C" in trained and not any(f'"content": "{t}"' in trained for t in expected)
    if template == "qwen":  # one user turn holds the three results, as the model was trained
        assert enc.text.count("<tool_response>") == 3
        assert enc.text.count("<|im_start|>user") == 2
