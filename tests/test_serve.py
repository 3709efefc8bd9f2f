"""`regen serve` with stand-in engines and a stand-in nvidia-smi on PATH: the exact command
lines and CUDA_VISIBLE_DEVICES of an 8-GPU launch, preflight errors, a server that dies
while starting, and --copy-model. The supervisor, API keys and launchers have modules of
their own (test_serve_supervisor.py, test_serve_keys.py, test_serve_launchers.py).

The stand-ins (tests/standins/) record their argv and environment and serve the OpenAI API
with the fake server on the port they were given, like a real engine would."""

from __future__ import annotations

import pytest

from regen.errors import ConfigError
from regen.serve.control import is_our_process
from regen.serve.fleetfile import FleetFile
from regen.serve.launch import ServeSpec, plan_servers, start_all
from serve_helpers import free_port_block, recorded, regen, stop_fleet_file


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
                "--tool-call-parser",  # Qwen's tool calls, as SGLang reads them
                "qwen25",
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
