"""Each vLLM fact of regen.testing.dialects, asserted against both the fake server
(dialect=vllm) and the real vLLM of the test run (tests/real_vllm.py): a fact the fake gets
wrong fails here, not in production. What only a fake shows (reasoning, aborts, keep-alive)
is listed on the engines page of the docs."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from real_vllm_client import json_post
from real_vllm_fleet import KEY
from regen.testing.dialects import VLLM
from regen.testing.fake_behaviour import echo_answer
from regen.testing.fake_server import Behaviour, FakeServer

CONTEXT = 2048  # the real fleet's --context
# The first real test waits for the fleet's start; the real one is asked for at run time.
pytestmark = [pytest.mark.timeout(1500), pytest.mark.real_vllm]


def counted(body: dict) -> dict:
    """The fake's answer, with a prompt as many tokens as it has words (as the tokenizer
    counts "hello hello ...", give or take the chat template)."""
    words = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
    return {**echo_answer(body), "prompt_tokens": words}


@pytest.fixture(params=["fake", "real"])
def vllm_server(request):
    """(url, model) of a vLLM: the fake speaking its dialect, or the real one."""
    if request.param == "real":
        real = request.getfixturevalue("real_vllm")
        yield real.url, real.model
        return
    behaviour = Behaviour(dialect="vllm", api_key=KEY, context=CONTEXT, answer=counted)
    fake = FakeServer(behaviour).start()
    try:
        yield fake.url, "fake-model"
    finally:
        fake.stop()


def chat(url: str, model: str, text: str, **fields) -> tuple[int, dict]:
    body = {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": text}]}
    return json_post(url + "/v1/chat/completions", {**body, **fields})


def test_version_path(vllm_server):
    url, _ = vllm_server
    (path,) = VLLM.info_paths
    request = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        answer = json.loads(resp.read())
    assert re.fullmatch(r"\d+\.\d+\.\d+", answer["version"])


def test_token_ids(vllm_server):
    url, model = vllm_server
    status, body = chat(url, model, "Hi there", return_token_ids=True)
    assert status == 200, body
    assert VLLM.token_ids == "vllm"  # top level prompt ids, per choice answer ids
    assert all(isinstance(i, int) for i in body["prompt_token_ids"])
    assert len(body["choices"][0]["token_ids"]) == body["usage"]["completion_tokens"]


def test_streamed_token_ids(vllm_server):
    url, model = vllm_server
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(
            {
                "model": model,
                "max_tokens": 8,
                "stream": True,
                "return_token_ids": True,
                "messages": [{"role": "user", "content": "Hi"}],
            }
        ).encode(),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as resp:
        events = [
            json.loads(line[6:])
            for line in resp.read().decode().splitlines()
            if line.startswith("data: {")
        ]
    assert VLLM.stream_token_ids == "chunks"
    assert events[0].get("prompt_token_ids")
    streamed = [i for e in events for c in e["choices"] for i in c.get("token_ids") or []]
    assert streamed, "no chunk carried token ids"


def test_error_shape_and_a_prompt_over_the_context(vllm_server):
    url, model = vllm_server
    status, body = chat(url, model, "hello " * (CONTEXT + 50))
    assert status == 400 and VLLM.error_shape == "wrapped"
    assert set(body) == {"error"} and {"message", "type", "code"} <= set(body["error"])
    template = re.escape(VLLM.overflow_message(999999, 8, CONTEXT))
    # vLLM says "at least N" when its tokenizer cut the prompt at the context + 1
    template = template.replace(r"contains\ 999999", r"contains\ (?:at\ least\ )?\d+")
    template = template.replace("999999", r"\d+")
    assert re.fullmatch(template, body["error"]["message"]), body["error"]["message"]


def test_prompt_plus_max_tokens_over_the_context(vllm_server):
    """The prompt fits, prompt + max_tokens does not."""
    url, model = vllm_server
    status, body = chat(url, model, "hello " * (CONTEXT - 48), max_tokens=200)
    if VLLM.overflow == "clamp":
        assert status == 200, body
        usage = body["usage"]
        assert usage["prompt_tokens"] + usage["completion_tokens"] <= CONTEXT
    else:
        assert status == 400, body


def test_seeds_are_honoured_without_a_flag(vllm_server):
    url, model = vllm_server
    answers = [
        chat(url, model, "Name a colour.", temperature=1.0, seed=11)[1]["choices"][0]["message"]
        for _ in range(2)
    ]
    assert VLLM.seed_needs_flag is False
    assert answers[0]["content"] == answers[1]["content"]
