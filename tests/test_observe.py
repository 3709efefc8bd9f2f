"""Signals, `regen status` on live and dead runs, and the Prometheus endpoint, all against a
real `regen generate` process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from gen_helpers import assert_exactly_once, write_prompts
from regen.testing.fake_server import Behaviour, echo_answer
from waiting import wait_until


def slow_server(fake_server, seconds: float = 0.2):
    return fake_server(
        Behaviour(
            slots=4, seconds_per_token=seconds / 8, answer=lambda b: {**echo_answer(b), "tokens": 8}
        )
    )


STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def stop_leftovers():
    """Every `regen generate` a test starts is stopped by its pid, even when the test fails."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def start(prompts: Path, out: Path, url: str, *extra: str) -> subprocess.Popen:
    command = [
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
        "4",
        "--display",
        "plain",
        "--log-interval",
        "0.5",
        *extra,
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    STARTED.append(proc)
    return proc


def status(out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "regen", "status", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


def test_sigterm_drains_in_flight_then_resume_finishes(tmp_path, fake_server):
    server = slow_server(fake_server, 0.4)
    ids = write_prompts(tmp_path / "p.jsonl", 60)
    out = tmp_path / "out"
    proc = start(tmp_path / "p.jsonl", out, server.url, "--drain-timeout", "10")
    wait_until(
        lambda: (out / "progress.json").exists() and len(server.requests) >= 8,
        20,
        "progress.json and eight requests",
    )
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert "SIGTERM received" in stdout and "resume" in stdout
    # The drain let every request in flight finish and be written: none was cut.
    written = status(out)["files"]["completions"]
    assert written == len(server.requests)
    assert written < 60
    server.behaviour.seconds_per_token = 0.01  # the rest need not be slow: the drain is over
    final = start(tmp_path / "p.jsonl", out, server.url)
    final.communicate(timeout=60)
    assert final.returncode == 0
    assert_exactly_once(out, ids)


def test_second_signal_exits_at_once_without_corrupting_output(tmp_path, fake_server):
    server = slow_server(fake_server, 2.0)
    ids = write_prompts(tmp_path / "p.jsonl", 16)
    out = tmp_path / "out"
    proc = start(tmp_path / "p.jsonl", out, server.url, "--drain-timeout", "60")
    wait_until(lambda: len(server.requests) >= 4, 20, "four requests")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)  # a second Ctrl-C a moment after the first: the gap is the test
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=10)
    assert proc.returncode == 130
    server.behaviour.seconds_per_token = 0.01  # the rest need not be slow: the exit is over
    final = start(tmp_path / "p.jsonl", out, server.url)
    final.communicate(timeout=120)
    assert final.returncode == 0
    assert_exactly_once(out, ids)


def test_status_tells_a_live_run_from_a_dead_one(tmp_path, fake_server):
    server = slow_server(fake_server, 0.3)
    write_prompts(tmp_path / "p.jsonl", 200)
    out = tmp_path / "out"
    proc = start(tmp_path / "p.jsonl", out, server.url)
    try:
        live = wait_until(
            lambda: (out / "progress.json").exists() and status(out), 20, "a status while running"
        )
        live = wait_until(
            lambda: (s := status(out))["progress"]["session"]["completed"] > 0 and s,
            20,
            "a status with a completion",
        )
        assert live["alive"]["alive"] is True and live["alive"]["pid"] == proc.pid
        assert live["progress"]["state"] == "running"
        assert live["progress"]["total"] == 200
        assert live["progress"]["servers"][0]["in_flight"] > 0
        assert live["manifest"]["config"]["servers"] == [server.url]
        text = subprocess.run(
            [sys.executable, "-m", "regen", "status", str(out)], capture_output=True, text=True
        ).stdout
        assert "RUNNING" in text and "ETA" in text
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
    dead = status(out)
    assert dead["alive"]["alive"] is False
    assert dead["progress"]["state"] == "running"  # what it last said; the lock tells the truth
    text = subprocess.run(
        [sys.executable, "-m", "regen", "status", str(out)], capture_output=True, text=True
    ).stdout
    assert "NOT RUNNING" in text and "died" in text
