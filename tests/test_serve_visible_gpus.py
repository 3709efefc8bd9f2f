"""`regen serve` inside a scheduler's allocation: the GPUs a job may use come in
CUDA_VISIBLE_DEVICES (Slurm's --gres, a device plugin), while nvidia-smi (the stand-in here,
8 free GPUs) lists the whole machine. Servers go on the job's GPUs only, each told its own
under the names the scheduler used."""

from __future__ import annotations

import re

import pytest

from regen.errors import ConfigError
from regen.serve.launch import ServeSpec, plan_servers, start_all
from serve_helpers import recorded


def spec(tmp_path, standin_env, **fields) -> ServeSpec:
    return ServeSpec(
        engine="sglang",
        model="Qwen/Qwen3-8B",
        log_dir=tmp_path / "logs",
        python=standin_env["STANDIN_PYTHON"],
        **fields,
    )


def test_servers_start_on_the_gpus_the_scheduler_gave_the_job(tmp_path, standin_env, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,2")
    launches = plan_servers(spec(tmp_path, standin_env))
    processes = start_all(launches, timeout=60, tied=True)
    try:
        assert [p.spec.gpus for p in processes] == [[5], [2]]  # not 8 servers on 0..7
        for process in processes:
            seen = recorded(tmp_path, process.spec.port)
            assert seen["env"]["CUDA_VISIBLE_DEVICES"] == str(process.spec.gpus[0])
    finally:
        for process in processes:
            process.stop()


def test_gpus_named_by_uuid_are_passed_on_by_uuid(tmp_path, standin_env, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-0003,GPU-0006,GPU-0007,GPU-0001")
    launches = plan_servers(spec(tmp_path, standin_env, gpus_per_server=2))
    assert [launch.gpus for launch in launches] == [[3, 6], [7, 1]]
    assert [launch.env["CUDA_VISIBLE_DEVICES"] for launch in launches] == [
        "GPU-0003,GPU-0006",
        "GPU-0007,GPU-0001",
    ]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,7")
    chosen = plan_servers(spec(tmp_path, standin_env, gpus=[7]))
    assert [(launch.gpus, launch.env["CUDA_VISIBLE_DEVICES"]) for launch in chosen] == [([7], "7")]


@pytest.mark.parametrize(
    ("visible", "gpus", "expected"),
    [
        ("6,7", [0, 1], "lets this job use only GPU(s) 6,7"),
        ("-1", None, "lets this job use no GPU"),
        ("", None, "lets this job use no GPU"),
        ("MIG-4f2a", None, "names 'MIG-4f2a', which is no single GPU"),
        ("3,9", None, "names '9', which is no single GPU"),
    ],
)
def test_what_the_job_may_not_use_is_refused_before_anything_starts(
    tmp_path, standin_env, monkeypatch, visible, gpus, expected
):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    with pytest.raises(ConfigError, match=re.escape(expected)) as err:
        plan_servers(spec(tmp_path, standin_env, gpus=gpus))
    assert "CUDA_VISIBLE_DEVICES" in err.value.message + (err.value.hint or "")
