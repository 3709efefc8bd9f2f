"""Launchers: the engine's console script beside --python when it has one (`vllm serve`,
`sglang serve`), else `python -m`; a launcher that exits 0 without serving is a failure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from regen.errors import ConfigError
from regen.serve.launch import ServeSpec, plan_servers, start_all
from serve_helpers import STANDINS, recorded


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
