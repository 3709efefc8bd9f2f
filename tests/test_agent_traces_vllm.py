"""Reasoning in the history, on the real vLLM 0.32 CPU build: regen sends each assistant
message's reasoning under the field vLLM reads (`reasoning`), vLLM takes it, and a Qwen3-style
chat template (tests/fixtures/templates/qwen3_style.jinja, passed with --chat-template; the
embedded SmolLM2's own renders no reasoning) puts the reasoning of the turns after the last
user message into the prompt and leaves that of earlier turns out. Checked on the prompt
token ids vLLM returns.

One fleet of its own (the template and a reasoning parser are server flags): started once for
this module. The parser plugin (tests/fixtures/templates/all_reasoning.py) makes all of an
answer reasoning, since SmolLM2 has no think tokens for a built-in parser to find.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest

from gen_helpers import read_lines, run
from real_vllm_client import json_post
from real_vllm_fleet import KEY, RealFleet
from regen.fleet.engine_info import identify
from regen.fleet.server import Server, Timeouts
from regen.run.conversation import RequestShape, request_body
from regen.run.sampling import Sampling

pytestmark = pytest.mark.timeout(1500)  # the fleet's start on two loaded cores
GREEDY = Sampling(max_tokens=12, temperature=0.0)


def detokenize(fleet: RealFleet, ids: list[int]) -> str:
    status, data = json_post(fleet.url + "/detokenize", {"model": fleet.model, "tokens": ids})
    assert status == 200, data
    return data["prompt"]


async def prompt_of(fleet: RealFleet, history: list[dict]) -> str:
    """The prompt vLLM rendered for `history`, sent as a run sends it (request_body, then the
    server's engine dialect), read back from the prompt token ids it returns."""
    server = Server(fleet.url, 1, KEY, Timeouts(request=600, connect=5))
    try:
        server.engine = await identify(server)
        assert server.engine.name == "vllm"
        shape = RequestShape(fleet.model, "all", return_token_ids=True)
        data = await server.chat(request_body(shape, history, None, GREEDY, 0))
    finally:
        await server.close()
    return detokenize(fleet, data["prompt_token_ids"])


def test_the_reasoning_of_the_current_tool_loop_reaches_the_template(real_vllm_qwen3_style):
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    history = [
        {"role": "user", "content": "Hello."},
        {"role": "assistant", "content": "Hi.", "reasoning_content": "EARLIER-TURN-THOUGHT"},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call],
            "reasoning_content": "IN-TURN-THOUGHT",
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C and sunny"},
    ]
    prompt = asyncio.run(prompt_of(real_vllm_qwen3_style, history))
    assert "<think>\nIN-TURN-THOUGHT\n</think>" in prompt
    assert "EARLIER-TURN-THOUGHT" not in prompt
    assert "18C and sunny" in prompt


def test_a_run_sends_the_reasoning_back_and_the_template_leaves_earlier_turns_out(
    tmp_path, real_vllm_qwen3_style, monkeypatch
):
    """--regenerate-turns all on the real server: the first regenerated turn's reasoning goes
    back with the second request (as `reasoning`, which vLLM takes: the run succeeds), and a
    user message comes between, so the template leaves it out of the second prompt. (A
    prompt file's trailing answer is the one to make, so a run's own in-turn case is a tool
    loop, which SmolLM2 never starts: the test above sends one as a run would.)"""
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    messages = [
        {"role": "user", "content": "Name a fruit."},
        {"role": "assistant", "content": "Apple."},
        {"role": "user", "content": "Name a colour."},
    ]
    row = {"id": "earlier", "messages": messages}
    (tmp_path / "p.jsonl").write_bytes(orjson.dumps(row) + b"\n")
    fleet = real_vllm_qwen3_style
    result = run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        [fleet.url],
        model=fleet.model,
        api_key_env="VLLM_API_KEY",
        regenerate_turns="all",
        return_token_ids=True,
        timeouts=Timeouts(request=600, connect=5),
        sampling=GREEDY,
    )
    assert result.exit_code == 0, result.message
    (record,) = read_lines(tmp_path / "out", "completions")
    assert len(record["meta"]["turns"]) == 2
    first = record["messages"][1]["reasoning_content"]
    assert first.strip(), "the parser plugin makes every answer reasoning"
    prompt = detokenize(fleet, record["token_ids"]["prompt"])
    assert "Name a colour." in prompt  # the second turn's prompt
    assert first.strip() not in prompt
