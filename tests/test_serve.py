"""`regen serve` with stand-in engines and a stand-in nvidia-smi on PATH: the exact command
lines and CUDA_VISIBLE_DEVICES of an 8-GPU launch, preflight errors, FLEET.json, --status,
--stop, a server that dies while starting, and the supervisor restarting a dead server.

The stand-ins (tests/standins/) record their argv and environment and serve the OpenAI API
with the fake server on the port they were given, like a real engine would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from gen_helpers import assert_exactly_once, run, write_prompts
from regen.errors import ConfigError
from regen.serve.control import is_our_process
from regen.serve.fleetfile import FleetFile
from regen.serve.launch import ServeSpec, free_port, plan_servers, start_all
from regen.serve.supervisor import RestartPolicy, Supervisor
from waiting import wait_until

STANDINS = Path(__file__).parent / "standins"


def regen(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "regen", *args], capture_output=True, text=True, timeout=timeout
    )


def stop_fleet_file(fleet_path: Path) -> subprocess.CompletedProcess:
    """`regen serve --stop`, then every pid the file names is killed by the test itself, so
    that a bug in --stop fails the test without leaving servers behind."""
    done = regen("serve", "--stop", str(fleet_path))
    if fleet_path.exists():
        for server in FleetFile.read(fleet_path).servers:
            try:  # looser than --stop's own check, on purpose: a stand-in on this port
                cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"engine.py" in cmdline and f"\0{server.port}\0".encode() in cmdline:
                os.killpg(server.pid, signal.SIGKILL)
    return done


def recorded(tmp_path: Path, port: int) -> dict:
    return orjson.loads((tmp_path / "records" / f"{port}.json").read_bytes())


def test_eight_gpu_sglang_launch_runs_the_exact_commands(tmp_path, standin_env):
    fleet_path = tmp_path / "fleet.json"
    model = tmp_path / "models" / "Qwen3-27B"
    model.mkdir(parents=True)
    python = standin_env["STANDIN_PYTHON"]
    done = regen(
        "serve",
        "--engine",
        "sglang",
        "--model",
        str(model),
        "--gpus",
        "0-7",
        "--port-base",
        str(free_port_block(8)),
        "--python",
        python,
        "--fleet",
        str(fleet_path),
        "--",
        "--reasoning-parser",
        "qwen3",
        "--mem-fraction-static",
        "0.85",
    )
    try:
        assert done.returncode == 0, done.stderr
        fleet = FleetFile.read(fleet_path)
        assert len(fleet.servers) == 8
        for gpu, server in enumerate(fleet.servers):
            seen = recorded(tmp_path, server.port)
            assert seen["env"]["CUDA_VISIBLE_DEVICES"] == str(gpu)
            assert seen["argv"][1:] == [
                "-m",
                "sglang.launch_server",
                "--model-path",
                str(model),
                "--served-model-name",
                "Qwen3-27B",
                "--host",
                "127.0.0.1",
                "--port",
                str(server.port),
                "--reasoning-parser",
                "qwen3",
                "--mem-fraction-static",
                "0.85",
            ]
            assert server.gpus == [gpu] and is_our_process(server)
        assert f"CUDA_VISIBLE_DEVICES=7 {python} -m sglang.launch_server" in done.stdout
        status = regen("serve", "--status", str(fleet_path))
        assert status.returncode == 0, status.stdout
        assert "8 of 8 servers answer" in status.stdout
    finally:
        stop = stop_fleet_file(fleet_path)
    assert stop.returncode == 0
    assert stop.stdout.count("stopped (pid") == 8
    assert not any(is_our_process(s) for s in fleet.servers)
    status = regen("serve", "--status", str(fleet_path))
    assert status.returncode == 1 and "0 of 8 servers answer" in status.stdout


def test_vllm_tensor_parallel_groups(tmp_path, standin_env):
    spec = ServeSpec(
        engine="vllm",
        model="Qwen/Qwen3-32B",
        log_dir=tmp_path / "logs",
        gpus=list(range(8)),
        gpus_per_server=2,
        python=standin_env["STANDIN_PYTHON"],
        context=32768,
        extra=["--speculative-config", '{"method": "mtp"}'],
    )
    launches = plan_servers(spec)
    processes = start_all(launches, timeout=60, tied=True)
    try:
        assert [p.spec.env["CUDA_VISIBLE_DEVICES"] for p in processes] == [
            "0,1",
            "2,3",
            "4,5",
            "6,7",
        ]
        for process in processes:
            seen = recorded(tmp_path, process.spec.port)
            assert seen["env"]["CUDA_VISIBLE_DEVICES"] == process.spec.env["CUDA_VISIBLE_DEVICES"]
            assert seen["argv"][1:] == [
                "-m",
                "vllm.entrypoints.cli.main",
                "serve",
                "Qwen/Qwen3-32B",
                "--served-model-name",
                "Qwen/Qwen3-32B",
                "--host",
                "127.0.0.1",
                "--port",
                str(process.spec.port),
                "--tensor-parallel-size",
                "2",
                "--max-model-len",
                "32768",
                "--speculative-config",
                '{"method": "mtp"}',
            ]
    finally:
        for process in processes:
            process.stop()
    assert all(p.exited() is not None for p in processes)


@pytest.mark.parametrize(
    ("change", "args", "expected"),
    [
        ({}, ["--gpus", "0-9"], "GPU(s) [8, 9] do not exist"),
        (
            {"STANDIN_GPUS": "0, GPU-0, 70000, 143771\\n1, GPU-1, 3, 143771\\n"},
            ["--gpus", "0-1"],
            "busy: GPU 0 (70000/143771 MiB used)",
        ),
        ({"STANDIN_SMI_FAIL": "1"}, [], "nvidia-smi failed: NVIDIA-SMI has failed"),
        ({"PATH": "/usr/bin:/bin"}, [], "nvidia-smi is not on PATH"),
        ({"STANDIN_MISSING": "sglang"}, [], "cannot import sglang"),
        ({}, ["--gpus", "0-2", "--gpus-per-server", "2"], "cannot be split into groups of 2"),
        ({}, ["--gpus", "x"], "--gpus 'x' is not a GPU list"),
    ],
)
def test_preflight_errors_name_the_fix(tmp_path, standin_env, monkeypatch, change, args, expected):
    for key, value in change.items():
        monkeypatch.setenv(key, value)
    done = regen(
        "serve",
        "--engine",
        "sglang",
        "--model",
        "org/model",
        "--fleet",
        str(tmp_path / "f.json"),
        "--python",
        standin_env["STANDIN_PYTHON"],
        *args,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert expected in done.stderr
    assert "hint:" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "f.json").exists()
    assert not list((tmp_path / "records").iterdir()), "nothing may start when preflight fails"


def test_port_in_use_and_missing_model_are_refused(tmp_path, standin_env):
    base = free_port_block(2)
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", base + 1))
        busy.listen()
        done = regen(
            "serve",
            "--engine",
            "llamacpp",
            "--model",
            __file__,
            "--replicas",
            "2",
            "--port-base",
            str(base),
            "--python",
            standin_env["STANDIN_PYTHON"],
            "--fleet",
            str(tmp_path / "f.json"),
        )
    assert done.returncode == 2 and f"port(s) [{base + 1}]" in done.stderr
    done = regen(
        "serve",
        "--engine",
        "vllm",
        "--model",
        "/no/such/model",
        "--fleet",
        str(tmp_path / "f.json"),
        "--python",
        standin_env["STANDIN_PYTHON"],
    )
    assert done.returncode == 2 and "--model /no/such/model does not exist" in done.stderr


def test_a_server_that_dies_while_starting_is_reported_with_its_log(
    tmp_path, standin_env, monkeypatch
):
    monkeypatch.setenv("STANDIN_DIE_AFTER", "1")  # the readiness chat kills it, as SIGILL did
    spec = ServeSpec(
        engine="llamacpp",
        model="m.gguf",
        served_name="m",
        log_dir=tmp_path / "logs",
        replicas=2,
        python=standin_env["STANDIN_PYTHON"],
    )
    with pytest.raises(ConfigError) as caught:
        start_all(plan_servers(spec), timeout=60, tied=True)
    err = caught.value
    assert "killed by SIGILL" in err.message
    assert "stand-in: dying as a miscompiled binary would" in err.message  # the log's tail
    assert "GGML_NATIVE=OFF" in (err.hint or "")


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


def free_port_block(count: int) -> int:
    """A base port with `count` free ports after it (best effort, on loopback)."""
    from regen.serve.launch import port_is_free

    for _ in range(50):
        base = free_port()
        if base + count < 65535 and all(port_is_free("127.0.0.1", base + k) for k in range(count)):
            return base
    raise RuntimeError("no block of free ports")


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


def test_copy_model_is_resumable(tmp_path):
    from regen.serve.launch import copy_model

    source = tmp_path / "src" / "Model"
    (source / "sub").mkdir(parents=True)
    (source / "a.safetensors").write_bytes(b"a" * 1000)
    (source / "sub" / "b.json").write_bytes(b"{}")
    dest = tmp_path / "shm"
    # An interrupted copy: one file whole, one short, a partial left behind.
    (dest / "Model").mkdir(parents=True)
    (dest / "Model" / "a.safetensors").write_bytes(b"a" * 10)
    (dest / "Model" / "a.safetensors.partial").write_bytes(b"a" * 5)
    (dest / "Model" / "sub").mkdir()
    (dest / "Model" / "sub" / "b.json").write_bytes(b"{}")
    before = (dest / "Model" / "sub" / "b.json").stat().st_mtime_ns
    target = copy_model(source, dest)
    assert target == dest / "Model"
    assert (target / "a.safetensors").read_bytes() == b"a" * 1000
    assert not (target / "a.safetensors.partial").exists()
    assert (target / "sub" / "b.json").stat().st_mtime_ns == before  # kept, not copied again


# -- servers that want an API key: it comes up, --status and generate --fleet use the key, and
# a wrong or missing key is reported at once with the fix (not after --startup-timeout).
KEY = "sk-serve-test-0123"


def serve_vllm(tmp_path, *extra: str, env: dict[str, str] | None = None, timeout: float = 60):
    fleet = tmp_path / "fleet.json"
    command = [
        sys.executable,
        "-m",
        "regen",
        "serve",
        "--engine",
        "vllm",
        "--model",
        "org/m",
        "--gpus",
        "0",
        "--fleet",
        str(fleet),
        "--python",
        standin_python(),
        "--startup-timeout",
        "30",
        *extra,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    return done, fleet


def standin_python() -> str:
    return os.environ["STANDIN_PYTHON"]


def test_a_key_after_dashes_is_sent_and_status_works(tmp_path, standin_env, monkeypatch):
    monkeypatch.setenv("SERVE_KEY", KEY)
    done, fleet = serve_vllm(tmp_path, "--api-key-env", "SERVE_KEY", "--", "--api-key", KEY)
    try:
        assert done.returncode == 0, done.stderr
        data = orjson.loads(fleet.read_bytes())
        assert (
            data["api_key_env"] == "SERVE_KEY"
            and KEY not in orjson.dumps({k: v for k, v in data.items() if k != "servers"}).decode()
        )
        status = regen("serve", "--status", str(fleet))
        assert status.returncode == 0 and "1 of 1 servers answer" in status.stdout
        # generate --fleet reads the variable's name from FLEET.json
        ids = write_prompts(tmp_path / "p.jsonl", 3)
        result = run(tmp_path / "p.jsonl", tmp_path / "out", [], fleet=fleet)
        assert result.exit_code == 0
        assert_exactly_once(tmp_path / "out", ids)
    finally:
        stop_fleet_file(fleet)


def test_vllm_inheriting_its_key_variable_comes_up(tmp_path, standin_env, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    done, fleet = serve_vllm(tmp_path)
    try:
        assert done.returncode == 0, done.stderr
        assert orjson.loads(fleet.read_bytes())["api_key_env"] == "VLLM_API_KEY"
    finally:
        stop_fleet_file(fleet)


@pytest.mark.parametrize("sent", [None, "sk-wrong-key-9876"])
def test_a_missing_or_wrong_key_is_reported_at_once(tmp_path, standin_env, sent):
    spec = ServeSpec(
        engine="vllm",
        model="org/m",
        log_dir=tmp_path / "logs",
        gpus=[0],
        python=standin_env["STANDIN_PYTHON"],
        extra=["--api-key", KEY],
    )
    # regen sends no key, or another key than the one the servers were started with
    launches = [replace(launch, api_key=sent) for launch in plan_servers(spec)]
    with pytest.raises(ConfigError) as caught:  # the 401 ends it, not the startup timeout
        start_all(launches, timeout=60, tied=True)
    assert "HTTP 401" in caught.value.message
    assert "--api-key-env" in (caught.value.hint or "")


# -- launchers: the engine's console script beside --python when it has one (`vllm serve`,
# `sglang serve`), else `python -m`; a launcher that exits 0 without serving is a failure.


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        ("vllm", ["serve", "org/M", "--served-model-name", "org/M"]),
        ("sglang", ["serve", "--model-path", "org/M", "--served-model-name", "org/M"]),
    ],
)
def test_the_console_script_beside_python_is_the_launcher(tmp_path, standin_env, engine, expected):
    script = Path(standin_env["STANDIN_PYTHON"]).parent / engine
    script.write_text(
        f'#!/bin/sh\nexec {sys.executable} {STANDINS / "engine.py"} --console {engine} "$@"\n'
    )
    script.chmod(0o755)
    spec = ServeSpec(
        engine=engine,
        model="org/M",
        log_dir=tmp_path / "logs",
        gpus=[0],
        python=standin_env["STANDIN_PYTHON"],
    )
    (process,) = start_all(plan_servers(spec), timeout=60, tied=True)
    try:
        assert process.spec.command[0] == str(script)
        assert process.spec.command[1 : 1 + len(expected)] == expected
        assert recorded(tmp_path, process.spec.port)["argv"][1:3] == ["--console", engine]
    finally:
        process.stop()


def test_a_launcher_that_exits_0_without_serving_is_reported_with_its_log(
    tmp_path, standin_env, monkeypatch
):
    monkeypatch.setenv("STANDIN_EXIT0", "1")
    spec = ServeSpec(
        engine="vllm",
        model="org/M",
        log_dir=tmp_path / "logs",
        gpus=[0],
        python=standin_env["STANDIN_PYTHON"],
    )
    with pytest.raises(ConfigError) as caught:
        start_all(plan_servers(spec), timeout=60, tied=True)
    assert "exited with code 0" in caught.value.message
    assert "only re-exports the module" in caught.value.message  # the log's tail
    assert "exited 0 without serving" in (caught.value.hint or "")
