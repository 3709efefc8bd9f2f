"""kill -9 a real `regen generate` process at random moments, restart it, and check that
nothing is lost, nothing is duplicated, and only requests in flight were redone."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from gen_helpers import assert_exactly_once, write_prompts
from regen.testing.fake_server import Behaviour, echo_answer

CONCURRENCY = 8


def regen_command(prompts: Path, out: Path, url: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(prompts),
        "--output-dir",
        str(out),
        "--servers",
        url,
        "--concurrency",
        str(CONCURRENCY),
        "--display",
        "plain",
        "--log-interval",
        "1",
    ]


def test_sigkill_at_random_points_then_resume_is_exactly_once(tmp_path, fake_server):
    server = fake_server(
        Behaviour(
            slots=CONCURRENCY,
            seconds_per_token=0.025,
            answer=lambda b: {**echo_answer(b), "tokens": 6},
        )
    )
    n = 500
    ids = write_prompts(tmp_path / "p.jsonl", n)
    out = tmp_path / "out"
    rng = random.Random(20261130)
    kills = 0
    for _ in range(6):
        proc = subprocess.Popen(
            regen_command(tmp_path / "p.jsonl", out, server.url),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            time.sleep(rng.uniform(0.8, 2.0))  # the kill at a random moment is the test
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
    server.behaviour.seconds_per_token = 0.001  # slow for the kills to land mid-run; no more
    final = subprocess.run(
        regen_command(tmp_path / "p.jsonl", out, server.url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert final.returncode == 0, final.stderr
    assert kills >= 3, "the run finished before it could be killed often enough"
    completions, errors = assert_exactly_once(out, ids)
    assert len(completions) == n and not errors
    for record in completions:
        assert record["messages"][-1]["content"] == f"answer to: question {record['id']}"
    # Only what was in flight at each kill was asked for twice.
    assert len(server.requests) <= n + kills * CONCURRENCY


def test_second_run_reports_nothing_to_do(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 5)
    command = regen_command(tmp_path / "p.jsonl", tmp_path / "out", server.url)
    first = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    second = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0
    assert "nothing to do" in second.stdout
