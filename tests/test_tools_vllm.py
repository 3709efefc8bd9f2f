"""Prompts with tools on the real vLLM 0.32 CPU build: the suite's shared fleet is started by
`regen serve --engine vllm --model embedded` (tests/real_vllm.py), which now sets the tool
parser of the model's family (SmolLM2's ChatML template: Hermes), so vLLM answers a request
with `tools` instead of HTTP 400 ("auto" tool choice requires --enable-auto-tool-choice and
--tool-call-parser), and a run of an agent blend's prompts stores answers, not errors."""

from __future__ import annotations

import orjson
import pytest

from gen_helpers import read_lines, run, write_prompts
from real_vllm_client import json_post
from real_vllm_fleet import KEY
from regen.fleet.server import Timeouts
from regen.run.sampling import Sampling

pytestmark = pytest.mark.timeout(1500)  # the first test waits for the fleets' start
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def test_the_fleet_regen_serve_started_answers_prompts_with_tools(real_vllm, tmp_path, monkeypatch):
    (server,) = real_vllm.fleet.servers
    assert server.command[-3:] == ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    ask = {"role": "user", "content": "What is the weather in Oslo?"}
    body = {"model": real_vllm.model, "messages": [ask], "tools": [WEATHER], "max_tokens": 8}
    status, data = json_post(real_vllm.url + "/v1/chat/completions", body, KEY)
    assert status == 200, data  # before: 400, "auto" tool choice requires ...
    assert data["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")

    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts, 1)
    with open(prompts, "ab") as fh:
        for i in range(2):
            fh.write(orjson.dumps({"id": f"t{i}", "messages": [ask], "tools": [WEATHER]}) + b"\n")
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    result = run(
        prompts,
        tmp_path / "run",
        [real_vllm.url],
        model=real_vllm.model,
        api_key_env="VLLM_API_KEY",
        timeouts=Timeouts(request=600, connect=5),
        sampling=Sampling(max_tokens=16, temperature=0.0),
    )
    assert result.exit_code == 0, result.message
    records = read_lines(tmp_path / "run", "completions")
    assert sorted(r["id"] for r in records) == ["p00000", "t0", "t1"]
    assert all(r["tools"] == [WEATHER] for r in records if r["id"].startswith("t"))
    assert not read_lines(tmp_path / "run", "errors")
