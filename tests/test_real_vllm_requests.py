"""The real-engine tier, regen's requests: a real vLLM (the CPU build in .venv-vllm, serving
the embedded SmolLM2) started once for the whole run by `regen serve --device cpu
--restart-dead` (tests/real_vllm.py). Each test keeps its work small: a few prompts of 16-32
tokens. Here: the engine named in every answer with its token ids, a request without the
key, a prompt over the context, and a client that goes away mid-stream."""

from __future__ import annotations

import http.client
import json
import time

import pytest

from gen_helpers import assert_exactly_once, write_prompts
from real_vllm_client import generate, json_post, regen, whole
from real_vllm_fleet import KEY

ENGINE = {"name": "vllm", "version": "0.32.0"}
pytestmark = pytest.mark.timeout(1500)  # the first test waits for the fleets' start


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_generate_with_token_ids_identifies_the_engine(real_vllm, tmp_path, stream):
    ids = write_prompts(tmp_path / "p.jsonl", 3)
    done = generate(
        real_vllm,
        tmp_path / "p.jsonl",
        tmp_path / "out",
        "--return-token-ids",
        *(["--stream"] if stream else []),
        "--seed",
        "3",
        "--temperature",
        "0.7",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    records, _ = assert_exactly_once(tmp_path / "out", ids)
    for record in records:
        assert whole(record), record
        assert record["meta"]["engine"] == ENGINE and record["meta"]["seed_honoured"] is True


def test_a_request_without_the_key_is_refused_with_the_fix(real_vllm, tmp_path):
    status, body = json_post(
        real_vllm.url + "/v1/chat/completions",
        {"model": real_vllm.model, "messages": [{"role": "user", "content": "Hi"}]},
        key=None,
    )
    assert status == 401, body
    write_prompts(tmp_path / "p.jsonl", 1)
    done = regen(
        "generate",
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "--servers",
        real_vllm.url,
        "--model",
        real_vllm.model,
        "--output-dir",
        str(tmp_path / "out"),
        "--display",
        "plain",
        key=None,
    )
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "401" in said, said
    assert "OPENAI_API_KEY" in said and "Traceback" not in said


def test_a_prompt_over_the_context_is_vllms_400(real_vllm):
    status, body = json_post(
        real_vllm.url + "/v1/chat/completions",
        {
            "model": real_vllm.model,
            "max_tokens": 16,
            "messages": [{"role": "user", "content": "hello " * 2100}],
        },
    )
    assert status == 400, body
    assert "maximum context length is 2048 tokens" in body["error"]["message"]


def test_a_client_that_goes_away_mid_stream_is_aborted_on_the_server(real_vllm):
    host, port = real_vllm.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    body = {
        "model": real_vllm.model,
        "stream": True,
        "max_tokens": 400,
        "ignore_eos": True,
        "messages": [{"role": "user", "content": "Count to a thousand."}],
    }
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    conn.request("POST", "/v1/chat/completions", json.dumps(body), headers)
    resp = conn.getresponse()
    assert resp.status == 200
    events = 0
    while events < 3:  # a few tokens have come: it runs
        line = resp.readline()
        assert line, "the stream ended before three events"
        events += line.startswith(b"data: ")
    assert real_vllm.metric("vllm:num_requests_running") == 1
    conn.sock.close()  # the client goes away without a word
    conn.close()
    deadline = time.monotonic() + 60
    while real_vllm.metric("vllm:num_requests_running") != 0:
        assert time.monotonic() < deadline, "the server kept generating for a client that left"
        time.sleep(0.5)
