"""The real-engine tier, servers that die: a real vLLM (the CPU build in .venv-vllm, serving
the embedded SmolLM2) started once for the whole run by `regen serve --device cpu
--restart-dead` (tests/real_vllm.py). Each test keeps its work small: a few prompts of 16-32
tokens. Here: the CPU build's seeded crash with chunked prefill on, and a kill -9 mid-run.

The kill -9 test comes last in this file: it waits for the restarted server, and the others
need not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gen_helpers import assert_exactly_once, write_prompts
from real_vllm_client import json_post, whole
from real_vllm_fleet import KEY, RealFleet

pytestmark = pytest.mark.timeout(1500)  # the first test waits for the fleets' start


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
