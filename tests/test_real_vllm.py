"""The real-engine tier: a real vLLM (the CPU build in .venv-vllm, serving the embedded
SmolLM2) started once for the whole run by `regen serve --device cpu --restart-dead`
(tests/real_vllm.py). Each test keeps its work small: a few prompts of 16-32 tokens.

The kill -9 test comes last in this file: it waits for the restarted server, and the others
need not."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gen_helpers import assert_exactly_once, write_prompts
from real_vllm import KEY, RealFleet, json_post

ENGINE = {"name": "vllm", "version": "0.32.0"}
pytestmark = pytest.mark.timeout(1500)  # the first test waits for the fleets' start


def regen(*args: str, key: str | None = KEY, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_API_KEY"}
    if key:
        env["VLLM_API_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "regen", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def generate(fleet: RealFleet, prompts: Path, out: Path, *extra: str, key: str | None = KEY):
    return regen(
        "generate",
        "--prompts",
        str(prompts),
        "--fleet",
        str(fleet.fleet_path),
        "--output-dir",
        str(out),
        "--max-output-tokens",
        "16",
        "--display",
        "plain",
        *extra,
        key=key,
    )


def whole(record: dict) -> bool:
    """A full answer: finished, its token ids as many as the engine counted, and not empty."""
    ids = record["token_ids"]["completion"]
    return (
        record["finish_reason"] in ("stop", "length")
        and len(ids) == record["usage"]["completion_tokens"] > 0
        and record["messages"][-1]["content"] != ""
    )


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


def test_score_with_the_real_prompt_logprobs_of_a_self_draft(real_vllm, tmp_path):
    """The server is its own draft: every answer token is its own top-1."""
    write_prompts(tmp_path / "p.jsonl", 3)
    done = generate(real_vllm, tmp_path / "p.jsonl", tmp_path / "run", "--temperature", "0")
    assert done.returncode == 0, done.stderr
    scored = regen(
        "score",
        str(tmp_path / "run"),
        "--draft-servers",
        real_vllm.url,
        "--draft-api",
        "vllm",
        "--api-key-env",
        "VLLM_API_KEY",
        "--tokenizer",
        "embedded",
        "--k",
        "3",
        "--json",
    )
    assert scored.returncode == 0, scored.stdout + scored.stderr
    overall = json.loads(scored.stdout)["drafts"][0]["groups"]["(overall)"]
    assert overall["rows"] == 3
    assert overall["top1_match"]["value"] >= 0.95, overall["top1_match"]


def test_the_engines_own_ids_export_as_the_template_renders_them(real_vllm, tmp_path):
    """A real engine's stored ids (SmolLM2's real ChatML template): check builds every sample
    from them and finds it equal to the re-tokenised one, and an export from the ids is the
    same bytes as one that re-tokenises (the ids stripped from the run)."""
    write_prompts(tmp_path / "p.jsonl", 4)
    extra = ("--return-token-ids", "--temperature", "0")
    done = generate(real_vllm, tmp_path / "p.jsonl", tmp_path / "run", *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    checked = regen(
        "check",
        str(tmp_path / "run"),
        "--tokenizer",
        "embedded",
        "--json",
        str(tmp_path / "check.json"),
    )
    report = json.loads((tmp_path / "check.json").read_text())
    assert report["overall"]["token_ids"] == {"checked": 4, "mismatched": 0}, checked.stdout
    plain = tmp_path / "plain" / "completions"
    plain.mkdir(parents=True)
    for shard in (tmp_path / "run" / "completions").glob("*.jsonl"):
        rows = [json.loads(line) for line in shard.read_text().splitlines() if line.strip()]
        assert all(r["token_ids"]["prompt"] for r in rows)
        (plain / shard.name).write_text(
            "".join(
                json.dumps({k: v for k, v in r.items() if k != "token_ids"}) + "\n" for r in rows
            )
        )
    outs = []
    for name in ("run", "plain"):
        out = tmp_path / f"out-{name}"
        exported = regen(
            "export",
            str(tmp_path / name),
            "-o",
            str(out),
            "--format",
            "speculators",
            "--tokenizer",
            "embedded",
        )
        assert exported.returncode == 0, exported.stdout + exported.stderr
        outs.append({p.name: p.read_bytes() for p in sorted(out.rglob("*.jsonl"))})
    assert outs[0] == outs[1] and outs[0]


def _seeded_load(fleet: RealFleet, requests: int) -> list[int]:
    """`requests` seeded chats at once, as a busy generate sends them; their statuses."""
    statuses: list[int] = []

    def one(n: int) -> None:
        status, _ = json_post(
            fleet.url + "/v1/chat/completions",
            {
                "model": fleet.model,
                "max_tokens": 16,
                "temperature": 0.7,
                "seed": n,
                "messages": [{"role": "user", "content": f"Tell me fact number {n} about cats."}],
            },
            timeout=300,
        )
        statuses.append(status)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=400)
    return statuses


def test_seeded_requests_kill_a_chunked_prefill_cpu_engine_and_regen_says_why(real_vllm_pair):
    """The CPU build's crash, reproduced where regen lets it happen (chunked prefill back on,
    a small step budget so prompts are split): the engine dies, and regen serve's report
    carries the cause from the server's log. The shared fleet, as regen serves it (chunked
    prefill off), takes the same seeded load without a failure."""
    chunked, shared = real_vllm_pair["chunked"], real_vllm_pair["shared"]
    assert "--enable-chunked-prefill dies on requests that carry a seed" in chunked.output()
    _seeded_load(chunked, 24)
    out = chunked.wait_for("restarting server server-0", timeout=300)
    exited = [line for line in out.splitlines() if line.startswith("server server-0 ")]
    assert "CPU Generator does not use offset" in exited[0], out  # why, not only "down"
    statuses = _seeded_load(shared, 24)
    assert statuses == [200] * 24


def test_kill_9_of_a_real_server_mid_run_loses_nothing(real_vllm, real_vllm_pair, tmp_path):
    """regen serve --restart-dead brings the killed server back, once; generate waits for it
    and ends with every answer whole, once."""
    ids = write_prompts(tmp_path / "p.jsonl", 8)
    before = real_vllm.fleet.servers[0].pid
    env = {**os.environ, "VLLM_API_KEY": KEY}
    command = [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "--fleet",
        str(real_vllm.fleet_path),
        "--output-dir",
        str(tmp_path / "out"),
        "--max-output-tokens",
        "24",
        "--return-token-ids",
        "--stream",
        "--concurrency",
        "2",
        "--display",
        "plain",
    ]
    with open(tmp_path / "generate.out", "wb") as sink:
        run = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 300
        while not _written(tmp_path / "out"):  # mid-run: some answers are in, others flying
            assert run.poll() is None and time.monotonic() < deadline, "no first answer"
            time.sleep(0.2)
        os.kill(before, signal.SIGKILL)
        run.wait(timeout=900)  # the restart takes minutes on two busy cores
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
    said = (tmp_path / "generate.out").read_text()
    assert run.returncode == 0, said
    records, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors and all(whole(r) for r in records), records
    out = real_vllm.wait_for("server server-0 is back and answers")
    assert out.count("killed by SIGKILL") == 1 and out.count("restarting server server-0") == 1
    after = real_vllm.fleet.servers[0].pid
    assert after != before and _group_gone(before)  # its engine core went with it
    # The engine that died of the seeded crash came back too, once.
    chunked = real_vllm_pair["chunked"].wait_for("server server-0 is back and answers")
    assert chunked.count("restarting server server-0") == 1


def _written(out: Path) -> bool:
    return any(p.stat().st_size for p in out.glob("completions/*.jsonl"))


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False
