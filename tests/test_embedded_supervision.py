"""The server that `regen generate` starts for itself: a death is seen at once and reported
with its signal and log; it is restarted in place and the run finishes exactly once; one that
keeps dying stops the run within seconds with the fix; it never outlives a kill -9 of regen,
and a leftover from a killed run is cleaned up.

The llama.cpp server here is the stand-in of tests/standins/llama_cpp (it is what
`python -m llama_cpp.server` runs when that folder leads PYTHONPATH), so deaths come on cue.
The real llama.cpp server is killed the same way in test_embedded_model.py."""

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
from regen.executors.local import LocalExecutor
from regen.run.config import build_config
from regen.serve.control import is_our_process
from regen.serve.fleetfile import FleetFile
from regen.serve.supervisor import RestartPolicy
from waiting import wait_until

STANDINS = Path(__file__).parent / "standins"


def generate(tmp_path: Path, n: int, **env: str) -> tuple[subprocess.Popen, list[str], Path]:
    ids = write_prompts(tmp_path / "p.jsonl", n)
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "regen",
            "generate",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "--output-dir",
            str(out),
            "--local-model",
            str(model),
            "--display",
            "plain",
            "--log-interval",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": standins_path(), **env},
    )
    return proc, ids, out


def standins_path() -> str:
    return os.pathsep.join([str(STANDINS), *sys.path])


def finish(proc: subprocess.Popen, timeout: float = 90) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    return out


def test_a_server_that_dies_once_is_restarted_and_the_run_finishes(tmp_path):
    proc, ids, out = generate(
        tmp_path, 30, STANDIN_DIE_AFTER="6", STANDIN_DIE_ONCE=str(tmp_path / "died")
    )
    text = finish(proc)
    assert proc.returncode == 0, text
    assert "server server-0 killed by SIGILL" in text
    assert "restarting server server-0" in text
    completions, errors = assert_exactly_once(out, ids)
    assert len(completions) == 30 and not errors


@pytest.mark.timeout(90)  # one that is never given up on keeps the run going
def test_a_server_that_keeps_dying_stops_the_run_with_the_fix(tmp_path, monkeypatch, capsys):
    # In this process, as `regen generate` runs it, so that the restarts can wait 0.1 s
    # instead of the 1 + 2 + 4 s of the default backoff (a policy no flag sets).
    monkeypatch.setenv("PYTHONPATH", standins_path())
    monkeypatch.setenv("STANDIN_DIE_AFTER", "3")
    write_prompts(tmp_path / "p.jsonl", 30)
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF")
    out = tmp_path / "out"
    config = build_config(
        {
            "input.prompts": tmp_path / "p.jsonl",
            "output.dir": out,
            "fleet.local_model": tmp_path / "tiny.gguf",
            "fleet.restart": RestartPolicy(backoff=0.1),
            "display.mode": "plain",
            "display.log_interval": 1,
        }
    )
    started = time.monotonic()
    outcome = LocalExecutor().run(config)
    printed = capsys.readouterr()
    text = "\n".join([printed.out, printed.err, *outcome.lines])
    assert outcome.exit_code == 5, text
    assert text.count("restarting server server-0") == 3  # the policy's restarts, then none
    assert "killed by SIGILL" in text and "not restarting it" in text
    assert "GGML_NATIVE=OFF" in text  # the fix
    assert "stand-in: dying as a miscompiled binary would" in text  # the log's tail
    assert time.monotonic() - started < 60, "it waited instead of stopping"
    assert not (out / "servers" / "FLEET.json").exists()


def test_the_server_dies_with_a_killed_regen_and_a_leftover_is_cleaned(tmp_path):
    # A slow server, so that regen is still running when it is killed.
    proc, ids, out = generate(tmp_path, 200, STANDIN_SECONDS_PER_TOKEN="0.05")
    record = out / "servers" / "FLEET.json"
    try:
        wait_until(record.exists, 60, f"{record}", alive=proc)
        (server,) = FleetFile.read(record).servers
        assert is_our_process(server)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
        wait_until(
            lambda: not is_our_process(server), 10, "the embedded server's end after regen's"
        )
    finally:
        if proc.poll() is None:
            proc.kill()
    # A leftover that did not die (another OS, or started by hand) is stopped by the next run.
    leftover = subprocess.Popen(
        server.command,
        env={**os.environ, "PYTHONPATH": standins_path()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # Reaped as soon as it ends, as init reaps a killed run's orphan: a zombie child of this
    # test would keep its process group in being, and the rerun wait out its 15-s grace.
    threading.Thread(target=leftover.wait, daemon=True).start()
    try:
        fleet = FleetFile.read(record)
        fleet.servers[0].pid = leftover.pid
        fleet.write(record)
        rerun, _, _ = generate(tmp_path, 200)
        text = finish(rerun, timeout=120)
        assert rerun.returncode == 0, text
        assert leftover.wait(timeout=10) is not None
    finally:
        if leftover.poll() is None:
            leftover.kill()
    completions, _ = assert_exactly_once(out, ids)
    assert len(completions) == 200
