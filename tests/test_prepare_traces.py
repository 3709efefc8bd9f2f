"""`prepare` keeps tool traces whole: call ids and results stay paired (a source without ids
gets them, in call order), and a trace that cannot be paired is a reject with its reason."""

from __future__ import annotations

import json

import pytest

from regen.errors import InputError
from regen.prepare.convert import Converter
from regen.prepare.formats import Options
from regen.prepare.formats.function_calling import FunctionCalling
from regen.prepare.formats.openai import OpenAIMessages
from regen.prepare.formats.traces import Traces
from regen.prepare.recipe import SourceSpec
from regen.tool_trace import trace_faults

SPEC = SourceSpec(name="agents", path="agents.jsonl")


def call(name: str, arguments: str, cid: str | None = None) -> dict:
    out = {"type": "function", "function": {"name": name, "arguments": arguments}}
    return {"id": cid, **out} if cid else out


def agent_row(*middle: dict) -> dict:
    return {
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            *middle,
            {"role": "assistant", "content": "Both sunny."},
        ]
    }


def prompt_of(row: dict, adapter=OpenAIMessages):
    return Converter(SPEC, adapter(Options())).convert(row, 0)[0]


def test_a_source_without_ids_gets_paired_ids():
    calls = [call("get_weather", '{"city": "Paris"}'), call("get_weather", '{"city": "Rome"}')]
    row = agent_row(
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "18C"},
        {"role": "tool", "content": "21C"},
    )
    messages = prompt_of(row).messages
    ids = [c["id"] for c in messages[1]["tool_calls"]]
    assert len(set(ids)) == 2 and [m["tool_call_id"] for m in messages[2:]] == ids
    assert trace_faults(messages) == []


@pytest.mark.parametrize(
    ("middle", "kind"),
    [
        (
            (
                {"role": "assistant", "content": "", "tool_calls": [call("f", "{}", "a")]},
                {"role": "tool", "tool_call_id": "zzz", "content": "x"},
            ),
            "orphan_tool_result",
        ),
        (
            (
                {"role": "assistant", "content": "", "tool_calls": [call("f", "{}", "a")]},
                {"role": "user", "content": "and?"},
            ),
            "unanswered_tool_call",
        ),
        (
            (
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [call("f", "{}", "a"), call("g", "{}", "b")],
                },
                {"role": "tool", "tool_call_id": "a", "content": "x"},
            ),
            "unanswered_tool_call",
        ),
        (
            (
                {"role": "assistant", "content": "", "tool_calls": [call("f", '{"x": ', "a")]},
                {"role": "tool", "tool_call_id": "a", "content": "x"},
            ),
            "tool_arguments_not_json",
        ),
    ],
    ids=["stale-id", "no-result", "one-of-two-results", "arguments-not-json"],
)
def test_a_trace_that_cannot_be_paired_is_a_reject_with_its_reason(middle, kind):
    with pytest.raises(InputError) as caught:
        prompt_of(agent_row(*middle))
    assert caught.value.kind == kind
    assert "broken tool trace" in caught.value.message and caught.value.hint


def test_hermes_calls_and_responses_stay_paired():
    system = '<tools>{"name": "get_weather", "parameters": {}}</tools>'
    payload = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    row = {
        "conversations": [
            {"from": "system", "value": system},
            {"from": "human", "value": "Weather in Paris?"},
            {"from": "gpt", "value": f"<tool_call>{payload}</tool_call>"},
            {"from": "tool", "value": "<tool_response>18C</tool_response>"},
            {"from": "gpt", "value": "It is 18C."},
        ]
    }
    messages = prompt_of(row, FunctionCalling).messages
    assert messages[-1] == {
        "role": "tool",
        "content": "18C",
        "tool_call_id": messages[-2]["tool_calls"][0]["id"],
    }


# Hermes parallel calls: one tool turn holds one <tool_response> block per call.
def hermes_calls(*calls: tuple[str, str]) -> str:
    """<tool_call> blocks as Hermes writes them (Python literals), one per (name, city)."""
    return "\n".join(
        f"<tool_call>\n{{'name': '{name}', 'arguments': {{'city': '{city}'}}}}\n</tool_call>"
        for name, city in calls
    )


def hermes_responses(*results: tuple[str | None, str]) -> str:
    """<tool_response> blocks, each naming its call (JSON, as Hermes does) or not (None)."""
    blocks = [
        json.dumps({"name": name, "content": text}) if name else text for name, text in results
    ]
    return "\n".join(f"<tool_response>\n{b}\n</tool_response>" for b in blocks)


def hermes_row(*turns: tuple[str, str]) -> dict:
    return {
        "conversations": [
            {"from": "human", "value": "Weather in Paris and Rome?"},
            *({"from": who, "value": text} for who, text in turns),
            {"from": "gpt", "value": "Both sunny."},
        ]
    }


PARIS, ROME, OSLO = ("get_weather", "Paris"), ("get_weather", "Rome"), ("get_time", "Oslo")
PARALLEL = {  # calls, responses, and the result each call must get
    "two-unnamed": ([PARIS, ROME], [(None, "18C"), (None, "21C")], ["18C", "21C"]),
    "two-named": ([PARIS, OSLO], [("get_weather", "18C"), ("get_time", "9:00")], ["18C", "9:00"]),
    "three-named-out-of-order": (
        [PARIS, OSLO, ROME],
        [("get_time", "9:00"), ("get_weather", "18C"), ("get_weather", "21C")],
        ["18C", "9:00", "21C"],
    ),
    "three-mixed": (
        [PARIS, ROME, OSLO],
        [("get_time", "9:00"), (None, "18C"), (None, "21C")],
        ["18C", "21C", "9:00"],
    ),
}


@pytest.mark.parametrize("case", PARALLEL, ids=list(PARALLEL))
def test_hermes_parallel_responses_become_one_tool_message_per_call(case):
    calls, responses, expected = PARALLEL[case]
    row = hermes_row(("gpt", hermes_calls(*calls)), ("tool", hermes_responses(*responses)))
    messages = prompt_of(row, FunctionCalling).messages
    assistant, results = messages[1], messages[2:]
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert len(set(ids)) == len(calls) == len(results)
    assert [m["role"] for m in results] == ["tool"] * len(calls)
    assert [m["tool_call_id"] for m in results] == ids  # in the calls' order
    assert [
        json.loads(m["content"])["content"] if "name" in m else m["content"] for m in results
    ] == expected
    named = [m for m in results if "name" in m]
    assert all(
        m["name"] == c["function"]["name"]
        for m in named
        for c in assistant["tool_calls"]
        if c["id"] == m["tool_call_id"]
    )
    assert trace_faults(messages) == []


@pytest.mark.parametrize(
    ("turns", "kind"),
    [
        (
            [
                ("gpt", hermes_calls(PARIS, ROME)),
                ("tool", hermes_responses((None, "18C"))),
                ("gpt", "And Rome?"),
                ("human", "Well?"),
            ],
            "unanswered_tool_call",
        ),
        ([("gpt", hermes_calls(PARIS, ROME)), ("human", "Well?")], "unanswered_tool_call"),
        (
            [
                ("gpt", hermes_calls(PARIS, ROME, OSLO)),
                ("tool", hermes_responses((None, "18C"), (None, "21C"))),
            ],
            "unanswered_tool_call",
        ),
        (
            [
                ("gpt", hermes_calls(PARIS, ROME)),
                ("tool", hermes_responses(("get_weather", "18C"), ("get_news", "quiet"))),
            ],
            "tool_response_not_called",
        ),
        (
            [
                ("gpt", hermes_calls(PARIS, OSLO)),
                ("tool", hermes_responses(("get_time", "9:00"), ("get_time", "10:00"))),
            ],
            "tool_response_not_called",
        ),
        (
            [
                ("gpt", hermes_calls(PARIS, ROME)),
                ("tool", hermes_responses((None, "18C"), (None, "21C"), (None, "5C"))),
            ],
            "extra_tool_response",
        ),
        (  # named as the calls are: still more responses than calls, as prepare.md says
            [
                ("gpt", hermes_calls(PARIS, ROME)),
                ("tool", hermes_responses(*[("get_weather", t) for t in ("18C", "21C", "5C")])),
            ],
            "extra_tool_response",
        ),
    ],
    ids=[
        "one-of-two-then-on",
        "no-tool-turn",
        "two-of-three-at-the-end",
        "uncalled-name",
        "a-name-answered-twice",
        "more-responses-than-calls",
        "three-named-for-two",
    ],
)
def test_hermes_responses_that_cannot_answer_the_calls_are_rejects_with_their_reason(turns, kind):
    with pytest.raises(InputError) as caught:
        prompt_of(hermes_row(*turns), FunctionCalling)
    assert caught.value.kind == kind and caught.value.hint


def test_hermes_prose_before_the_responses_is_kept_with_the_first():
    """A line of prose before the <tool_response> blocks (some Hermes datasets write one) is
    no result of its own: it stays with the first block's message, and the pairing holds."""
    prose = "Here are the results of the calls:\n" + hermes_responses((None, "18C"), (None, "21C"))
    row = hermes_row(("gpt", hermes_calls(PARIS, ROME)), ("tool", prose))
    messages = prompt_of(row, FunctionCalling).messages
    results = messages[2:]
    assert [m["content"] for m in results] == ["Here are the results of the calls:\n18C", "21C"]
    assert [m["tool_call_id"] for m in results] == [c["id"] for c in messages[1]["tool_calls"]]
    assert trace_faults(messages) == []


def test_other_formats_already_answer_parallel_calls_one_message_each():
    """OpenAI messages (agent datasets, OpenAI API traces) carry one tool message per call;
    an Anthropic trace answers parallel tool_use blocks with one user turn of tool_result
    blocks: each becomes its own tool message under its tool_use_id."""
    calls = [call("get_weather", '{"city": "Paris"}', "a"), call("get_weather", "{}", "b")]
    openai = agent_row(
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "b", "content": "21C"},
        {"role": "tool", "tool_call_id": "a", "content": "18C"},
    )
    assert [m.get("tool_call_id") for m in prompt_of(openai).messages] == [None, None, "b", "a"]
    uses = [
        {"type": "tool_use", "id": f"tu_{c}", "name": "get_weather", "input": {"city": c}}
        for c in ("Paris", "Rome")
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"tu_{c}", "content": t}
        for c, t in (("Paris", "18C"), ("Rome", "21C"))
    ]
    body = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": uses},
            {"role": "user", "content": [*results, {"type": "text", "text": "And tomorrow?"}]},
        ],
    }
    messages = prompt_of({"body": body}, Traces).messages
    assert [c["id"] for c in messages[2]["tool_calls"]] == ["tu_Paris", "tu_Rome"]
    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in messages[3:]] == [
        ("tool", "tu_Paris", "18C"),
        ("tool", "tu_Rome", "21C"),
        ("user", None, "And tomorrow?"),
    ]
