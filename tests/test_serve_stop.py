"""`regen serve --stop` stops everything `regen serve` started: the `--restart-dead`
supervisor first (alive, it would restart the servers --stop kills), then every server, whether
one was restarted before or not; the fleet file then reads as stopped in `--status`.

With the stand-in engine (tests/standins/) and with the real llama.cpp server and the
embedded SmolLM2 model. The real vLLM CPU fleets of tests/real_vllm.py are stopped with
`regen serve --stop` at the end of the session, and checked there the same way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from regen.serve.control import is_our_process, is_our_supervisor
from regen.serve.fleetfile import FleetFile
from regen.serve.process import answers_chat
from waiting import wait_until


def regen(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "regen", *args], capture_output=True, text=True, timeout=timeout
    )


def start_supervised(fleet_path: Path, *args: str) -> subprocess.Popen:
    """`regen serve ... --restart-dead` in the background, returned once FLEET.json exists."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "regen",
            "serve",
            "--fleet",
            str(fleet_path),
            "--restart-dead",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(fleet_path.exists, 120, f"{fleet_path} from regen serve", alive=proc)
    except AssertionError:
        proc.kill()
        proc.wait(timeout=30)
        raise
    return proc


def kill_and_wait_for_restart(fleet_path: Path) -> None:
    """SIGKILL server-0 and wait until the supervisor has a new one answering on its port."""
    first = FleetFile.read(fleet_path)
    os.kill(first.servers[0].pid, signal.SIGKILL)

    def restarted() -> bool:
        now = FleetFile.read(fleet_path)
        server = now.servers[0]
        if server.pid == first.servers[0].pid or not is_our_process(server):
            return False
        return answers_chat(server.url, now.served_model_name, timeout=5)

    wait_until(restarted, 60, "a new server-0 answering", interval=0.3)


def assert_all_stopped(fleet_path: Path, proc: subprocess.Popen | None) -> None:
    """The supervisor exited, no server runs or answers two seconds later, and --status
    says the fleet was stopped."""
    if proc is not None:
        proc.wait(timeout=30)  # today's bug: the supervisor lived on and restarted them
    time.sleep(2)  # "two seconds later": nothing may come back in that time
    fleet = FleetFile.read(fleet_path)
    assert not is_our_supervisor(fleet.supervisor)
    assert not any(is_our_process(s) for s in fleet.servers)
    assert not any(answers_chat(s.url, fleet.served_model_name, timeout=5) for s in fleet.servers)
    status = regen("serve", "--status", str(fleet_path))
    assert status.returncode == 1, status.stdout
    assert "stopped on purpose at" in status.stdout
    assert "DOWN" not in status.stdout and "  stopped" in status.stdout


def clean_up(fleet_path: Path, proc: subprocess.Popen | None, pids: set[int]) -> None:
    """Whatever --stop missed is killed here by pid, so a bug fails the test, never leaks."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)
    if fleet_path.exists():
        pids |= {s.pid for s in FleetFile.read(fleet_path).servers if s.pid}
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


@pytest.mark.parametrize("restarted", [False, True], ids=["as-started", "after-a-restart"])
def test_stop_ends_the_supervisor_and_every_server(tmp_path, standin_env, restarted):
    fleet_path = tmp_path / "fleet.json"
    engine = ["--engine", "llamacpp", "--model", "m.gguf", "--replicas", "2"]
    proc = start_supervised(fleet_path, *engine, "--python", standin_env["STANDIN_PYTHON"])
    pids = {s.pid for s in FleetFile.read(fleet_path).servers if s.pid}
    try:
        assert is_our_supervisor(FleetFile.read(fleet_path).supervisor)
        if restarted:
            kill_and_wait_for_restart(fleet_path)
            pids |= {s.pid for s in FleetFile.read(fleet_path).servers if s.pid}
        done = regen("serve", "--stop", str(fleet_path))
        assert done.returncode == 0, done.stderr
        assert_all_stopped(fleet_path, proc)
        assert f"supervisor: stopped (pid {proc.pid})" in done.stdout
    finally:
        clean_up(fleet_path, proc, pids)


def test_stop_of_servers_without_a_supervisor_reads_as_stopped(tmp_path, standin_env):
    fleet_path = tmp_path / "fleet.json"
    started = regen(
        "serve",
        "--engine",
        "llamacpp",
        "--model",
        "m.gguf",
        "--python",
        standin_env["STANDIN_PYTHON"],
        "--fleet",
        str(fleet_path),
    )
    try:
        assert started.returncode == 0, started.stderr
        assert FleetFile.read(fleet_path).supervisor is None
        done = regen("serve", "--stop", str(fleet_path))
        assert done.returncode == 0 and "server-0: stopped" in done.stdout, done.stdout
        assert_all_stopped(fleet_path, None)
    finally:
        clean_up(fleet_path, None, set())


def test_stop_ends_a_restarted_real_llama_cpp_fleet(tmp_path):
    """The real engine: llama.cpp's server with the embedded model, one server killed and
    restarted under the supervisor, then --stop."""
    fleet_path = tmp_path / "fleet.json"
    proc = start_supervised(
        fleet_path, "--engine", "llamacpp", "--model", "embedded", "--threads", "1"
    )
    pids = {s.pid for s in FleetFile.read(fleet_path).servers if s.pid}
    try:
        kill_and_wait_for_restart(fleet_path)
        pids |= {s.pid for s in FleetFile.read(fleet_path).servers if s.pid}
        done = regen("serve", "--stop", str(fleet_path))
        assert done.returncode == 0, done.stderr
        assert_all_stopped(fleet_path, proc)
        assert "supervisor: stopped" in done.stdout
    finally:
        clean_up(fleet_path, proc, pids)


def test_a_fleet_file_whose_supervisor_lives_is_not_overwritten(tmp_path):
    """Its servers may be between a death and their restart: still the supervisor's."""
    from regen.errors import ConfigError
    from regen.serve.fleetfile import FleetServer, FleetSupervisor
    from regen.serve.run import refuse_running_fleet

    fleet_path = tmp_path / "fleet.json"
    server = FleetServer("server-0", "http://127.0.0.1:1", 1, None, "log", ["python", "x"])
    alive = FleetSupervisor.this_process()  # this test's own process stands in for it
    FleetFile("llamacpp", "m", "m", [server], supervisor=alive).write(fleet_path)
    with pytest.raises(ConfigError, match=f"its supervisor, pid {alive.pid}"):
        refuse_running_fleet(fleet_path)
    FleetFile("llamacpp", "m", "m", [server]).write(fleet_path)
    refuse_running_fleet(fleet_path)  # nothing of it runs: replaced
