"""`prepare` keeps tool traces whole: call ids and results stay paired (a source without ids
gets them, in call order), and a trace that cannot be paired is a reject with its reason."""

from __future__ import annotations

import pytest

from regen.errors import InputError
from regen.prepare.convert import Converter
from regen.prepare.formats import Options
from regen.prepare.formats.function_calling import FunctionCalling
from regen.prepare.formats.openai import OpenAIMessages
from regen.prepare.recipe import SourceSpec
from regen.tool_trace import trace_faults

SPEC = SourceSpec(name="agents", path="agents.jsonl")


def call(name: str, arguments: str, cid: str | None = None) -> dict:
    out = {"type": "function", "function": {"name": name, "arguments": arguments}}
    return {"id": cid, **out} if cid else out


def agent_row(*middle: dict) -> dict:
    return {"messages": [{"role": "user", "content": "Weather in Paris and Rome?"}, *middle,
                         {"role": "assistant", "content": "Both sunny."}]}  # fmt: skip


def prompt_of(row: dict, adapter=OpenAIMessages):
    return Converter(SPEC, adapter(Options())).convert(row, 0)[0]


def test_a_source_without_ids_gets_paired_ids():
    calls = [call("get_weather", '{"city": "Paris"}'), call("get_weather", '{"city": "Rome"}')]
    row = agent_row({"role": "assistant", "content": "", "tool_calls": calls},
                    {"role": "tool", "content": "18C"},
                    {"role": "tool", "content": "21C"})  # fmt: skip
    messages = prompt_of(row).messages
    ids = [c["id"] for c in messages[1]["tool_calls"]]
    assert len(set(ids)) == 2 and [m["tool_call_id"] for m in messages[2:]] == ids
    assert trace_faults(messages) == []


@pytest.mark.parametrize(
    ("middle", "kind"),
    [
        (({"role": "assistant", "content": "", "tool_calls": [call("f", "{}", "a")]},
          {"role": "tool", "tool_call_id": "zzz", "content": "x"}), "orphan_tool_result"),
        (({"role": "assistant", "content": "", "tool_calls": [call("f", "{}", "a")]},
          {"role": "user", "content": "and?"}), "unanswered_tool_call"),
        (({"role": "assistant", "content": "", "tool_calls": [call("f", "{}", "a"),
                                                              call("g", "{}", "b")]},
          {"role": "tool", "tool_call_id": "a", "content": "x"}), "unanswered_tool_call"),
        (({"role": "assistant", "content": "", "tool_calls": [call("f", '{"x": ', "a")]},
          {"role": "tool", "tool_call_id": "a", "content": "x"}), "tool_arguments_not_json"),
    ],
    ids=["stale-id", "no-result", "one-of-two-results", "arguments-not-json"],
)  # fmt: skip
def test_a_trace_that_cannot_be_paired_is_a_reject_with_its_reason(middle, kind):
    with pytest.raises(InputError) as caught:
        prompt_of(agent_row(*middle))
    assert caught.value.kind == kind
    assert "broken tool trace" in caught.value.message and caught.value.hint


def test_hermes_calls_and_responses_stay_paired():
    system = '<tools>{"name": "get_weather", "parameters": {}}</tools>'
    payload = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    row = {"conversations": [
        {"from": "system", "value": system},
        {"from": "human", "value": "Weather in Paris?"},
        {"from": "gpt", "value": f"<tool_call>{payload}</tool_call>"},
        {"from": "tool", "value": "<tool_response>18C</tool_response>"},
        {"from": "gpt", "value": "It is 18C."},
    ]}  # fmt: skip
    messages = prompt_of(row, FunctionCalling).messages
    assert messages[-1] == {"role": "tool", "content": "18C",
                            "tool_call_id": messages[-2]["tool_calls"][0]["id"]}  # fmt: skip
