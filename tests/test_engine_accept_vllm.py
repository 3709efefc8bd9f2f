"""The serving drafter's acceptance against a real vLLM (the CPU build in .venv-vllm) that
speculates with n-gram prompt lookup: what generate keeps per answer, plain and streamed, and
`score --from-engine`'s counters, equal to what the server's own /metrics counted over the same
requests. One server for the module (it takes minutes to start); stopped by its pid."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import read_lines, run
from regen.cli import main
from regen.fleet.server import Timeouts
from regen.run.sampling import Sampling

ROOT = Path(__file__).resolve().parent.parent
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
K = 3
SPEC = {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": 3}
READY_S = 1200  # two busy cores: about 2.5 minutes, far more under load
# the server's start counts in the first test's time: above the suite's 300 s per test
pytestmark = pytest.mark.timeout(READY_S + 300)
# Prompts whose answers repeat the prompt, so that n-gram lookup drafts and hits.
PROMPTS = {
    "copy": ["Repeat exactly: the cat sat on the mat, the cat sat on the mat.",
             "Repeat exactly: one two three four, one two three four, one two three four."],
    "list": ["List the days of the week, separated by commas.",
             "Count from one to twelve in words, separated by commas."],
}  # fmt: skip


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def spec_vllm(tmp_path_factory) -> Iterator[str]:
    if not VLLM_PYTHON.exists():
        pytest.fail(f"no {VLLM_PYTHON}: run scripts/bootstrap.sh --test (it installs vLLM)")
    from regen.serve.hf_model import ensure_hf_model

    model = ensure_hf_model(str(VLLM_PYTHON))
    port, log = _port(), tmp_path_factory.mktemp("vllm") / "server.log"
    cmd = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--served-model-name", "smol", "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", "2048", "--speculative-config", json.dumps(SPEC),
           "--per-request-spec-decode-metrics", "detailed"]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, proc, log)
        yield url
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """The API server and its engine-core child (one process group): TERM, then KILL."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _wait(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"vLLM exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/v1/models", timeout=5):
                return
        except OSError:
            time.sleep(3)
    pytest.fail(f"vLLM not ready in {READY_S} s:\n{log.read_text()[-3000:]}")


def counters(url: str) -> dict[str, float]:
    """The server's spec-decode counters, per position for the accepted tokens."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:spec_decode_num_") or "_total{" not in line:
            continue
        name = line.split("{", 1)[0].removeprefix("vllm:spec_decode_").removesuffix("_total")
        if 'position="' in line:
            name = "accepted_at_" + line.split('position="', 1)[1].split('"', 1)[0]
        out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def write_prompts(path: Path) -> None:
    with open(path, "wb") as fh:
        for category, texts in PROMPTS.items():
            for i, text in enumerate(texts):
                line = {"id": f"{category}-{i}", "messages": [{"role": "user", "content": text}],
                        "meta": {"category": category}}  # fmt: skip
                fh.write(orjson.dumps(line) + b"\n")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_engine_acceptance_per_answer_adds_up_to_its_metrics(tmp_path, spec_vllm, stream):
    write_prompts(tmp_path / "p.jsonl")
    before = counters(spec_vllm)
    timeouts = Timeouts(request=600, connect=5, stall=300, stream=stream)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [spec_vllm], model="smol",
                 timeouts=timeouts, sampling=Sampling(max_tokens=48, temperature=0.0))  # fmt: skip
    assert result.exit_code == 0, result.message
    after = counters(spec_vllm)
    delta = {name: after[name] - before.get(name, 0.0) for name in after}
    records = read_lines(tmp_path / "out", "completions")
    assert len(records) == 4
    specs = [r["meta"]["speculative_decoding"] for r in records]
    assert all(s["num_spec_tokens"] == K and len(s["per_step_accepted"]) == s["num_spec_steps"]
               for s in specs)  # fmt: skip
    assert sum(s["num_spec_steps"] for s in specs) == delta["num_drafts"] > 0
    cli = CliRunner().invoke(main, ["score", str(tmp_path / "out"), "--from-engine", "--all",
                                    "--json"])  # fmt: skip
    assert cli.exit_code == 0, cli.output
    draft = orjson.loads(cli.output)["drafts"][0]
    overall = draft["engine_counters"]["(overall)"]
    for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens",
                 *(f"accepted_at_{i}" for i in range(K))):  # fmt: skip
        assert overall.get(name, 0) == delta[name], name
    at_k = draft["groups"]["(overall)"]["by_k"][0]
    assert at_k["tau"]["value"] == round(1 + delta["num_accepted_tokens"] / delta["num_drafts"], 4)
    assert set(draft["groups"]) == {"copy", "list", "(overall)"}
