"""`regen serve`'s supervisor with stand-in engines: a dead server restarted in place, one
that keeps dying given up on, --restart-dead stopping its servers on SIGTERM, and a
fleet file of running servers left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from regen.serve.control import is_our_process
from regen.serve.fleetfile import FleetFile
from regen.serve.launch import ServeSpec, plan_servers, start_all
from regen.serve.supervisor import RestartPolicy, Supervisor
from serve_helpers import regen, stop_fleet_file
from waiting import wait_until


def test_supervisor_restarts_a_dead_server_in_place(tmp_path, standin_env, monkeypatch):
    monkeypatch.setenv("STANDIN_DIE_AFTER", "2")
    monkeypatch.setenv("STANDIN_DIE_ONCE", str(tmp_path / "died-once"))
    spec = ServeSpec(
        engine="llamacpp",
        model="m.gguf",
        served_name="m",
        log_dir=tmp_path / "logs",
        python=standin_env["STANDIN_PYTHON"],
    )
    (process,) = start_all(plan_servers(spec), timeout=60, tied=True)
    supervisor = Supervisor([process], RestartPolicy(backoff=0.1, startup_timeout=30))
    try:
        first_pid = process.pid
        from regen.serve.process import answers_chat

        assert not answers_chat(process.spec.url, "m", timeout=10)  # the 2nd chat kills it
        kinds = _step_until(supervisor, "ready")
        assert kinds[:3] == ["exited", "restarted", "ready"]
        assert process.pid != first_pid and process.spec.port == spec_port(process)
        assert answers_chat(process.spec.url, "m", timeout=10)
    finally:
        process.stop()


def test_supervisor_gives_up_on_a_server_that_keeps_dying(tmp_path, standin_env, monkeypatch):
    monkeypatch.setenv("STANDIN_DIE_AFTER", "2")
    spec = ServeSpec(
        engine="llamacpp",
        model="m.gguf",
        served_name="m",
        log_dir=tmp_path / "logs",
        python=standin_env["STANDIN_PYTHON"],
    )
    (process,) = start_all(plan_servers(spec), timeout=60, tied=True)
    from regen.serve.process import answers_chat

    # Every incarnation passes its readiness chat, then dies on the next one.
    supervisor = Supervisor(
        [process],
        RestartPolicy(max_restarts=2, backoff=0.05, startup_timeout=30),
        ready_check=lambda p: answers_chat(p.spec.url, "m") and answers_chat(p.spec.url, "m"),
    )
    try:
        answers_chat(process.spec.url, "m")
        kinds = _step_until(supervisor, "dead")
        assert kinds.count("restarted") == 2 and kinds[-1] == "dead"
        assert supervisor.all_dead
    finally:
        process.stop()


def _step_until(supervisor: Supervisor, kind: str, timeout: float = 60) -> list[str]:
    kinds: list[str] = []

    def stepped() -> bool:
        kinds.extend(c.kind for c in supervisor.step())
        return kind in kinds

    try:
        wait_until(stepped, timeout, f"{kind!r} from the supervisor")
    except AssertionError as error:
        raise AssertionError(f"{error}; saw {kinds}") from None
    return kinds


def spec_port(process) -> int:
    return int(process.spec.command[process.spec.command.index("--port") + 1])


def test_restart_dead_mode_stops_its_servers_on_sigterm(tmp_path, standin_env):
    fleet_path = tmp_path / "fleet.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "regen",
            "serve",
            "--engine",
            "llamacpp",
            "--model",
            "m.gguf",
            "--replicas",
            "2",
            "--python",
            standin_env["STANDIN_PYTHON"],
            "--fleet",
            str(fleet_path),
            "--restart-dead",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(fleet_path.exists, 60, f"{fleet_path}", interval=0.2, alive=proc)
        fleet = FleetFile.read(fleet_path)
        assert all(is_our_process(s) for s in fleet.servers)
        os.kill(fleet.servers[0].pid, signal.SIGKILL)

        def restarted() -> bool:
            new = FleetFile.read(fleet_path).servers[0]
            return new.pid != fleet.servers[0].pid and is_our_process(new)

        wait_until(restarted, 30, "the killed server restarted", interval=0.2)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 0, out
    assert "killed by SIGKILL" in out and "restarting server server-0" in out
    assert "stopped 2 server(s)" in out
    assert not any(is_our_process(s) for s in FleetFile.read(fleet_path).servers)


def test_a_fleet_file_of_running_servers_is_not_overwritten(tmp_path, standin_env):
    fleet_path = tmp_path / "fleet.json"
    args = [
        "serve",
        "--engine",
        "llamacpp",
        "--model",
        "m.gguf",
        "--python",
        standin_env["STANDIN_PYTHON"],
        "--fleet",
        str(fleet_path),
    ]
    first = regen(*args)
    try:
        assert first.returncode == 0, first.stderr
        again = regen(*args)
        assert again.returncode == 2
        assert "lists servers that still run (server-0)" in again.stderr
        assert f"regen serve --stop {fleet_path}" in again.stderr
    finally:
        stop_fleet_file(fleet_path)
    after_stop = regen(*args)  # a stale file of stopped servers is simply replaced
    stop_fleet_file(fleet_path)
    assert after_stop.returncode == 0, after_stop.stderr
