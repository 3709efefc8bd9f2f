"""Servers that want an API key: it comes up, --status and generate --fleet use the key,
and a wrong or missing key is reported at once with the fix (not after
--startup-timeout)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import orjson
import pytest

from gen_helpers import assert_exactly_once, run, write_prompts
from regen.errors import ConfigError
from regen.serve.launch import ServeSpec, plan_servers, start_all
from serve_helpers import regen, standin_python, stop_fleet_file

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
