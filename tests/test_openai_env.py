"""OPENAI_BASE_URL / OPENAI_API_KEY used the way the OpenAI SDK and vLLM users expect."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gen_helpers import assert_exactly_once, write_prompts
from regen.cli import main
from regen.errors import ConfigError
from regen.fleet.openai_env import resolve_api_key, servers_from_env


def generate(tmp_path, *args: str, env: dict[str, str]):
    prompts = tmp_path / "p.jsonl"
    args = ("--prompts", str(prompts), "-o", str(tmp_path / "run"), "--display", "plain", *args)
    return CliRunner().invoke(main, ["generate", *args], env=env)


def test_base_url_names_the_server_and_the_key_is_sent_but_never_printed(tmp_path, fake_server):
    server = fake_server(api_key="sk-secret-123")
    ids = write_prompts(tmp_path / "p.jsonl", 4)
    env = {"OPENAI_BASE_URL": server.url + "/v1", "OPENAI_API_KEY": "sk-secret-123"}
    result = generate(tmp_path, env=env)
    assert result.exit_code == 0, result.output
    assert "api key     $OPENAI_API_KEY" in result.output
    assert "sk-secret-123" not in result.output
    assert f"per server (live concurrency picks the level): {server.url}" in result.output
    assert_exactly_once(tmp_path / "run", ids)
    manifest = (tmp_path / "run" / "manifest.json").read_text()
    assert "sk-secret-123" not in manifest


def test_flags_win_over_the_environment(tmp_path, fake_server):
    wanted, other = fake_server(api_key="right"), fake_server()
    write_prompts(tmp_path / "p.jsonl", 2)
    env = {"OPENAI_BASE_URL": other.url, "OPENAI_API_KEY": "wrong", "MY_KEY": "right"}
    result = generate(tmp_path, "--servers", wanted.url, "--api-key-env", "MY_KEY", env=env)
    assert result.exit_code == 0, result.output
    assert "api key     $MY_KEY (--api-key-env)" in result.output
    assert len(wanted.requests) == 2 and not other.requests


def test_a_401_says_the_server_wants_a_key(tmp_path, fake_server):
    server = fake_server(api_key="needed")
    write_prompts(tmp_path / "p.jsonl", 1)
    result = generate(tmp_path, "--servers", server.url, env={"OPENAI_API_KEY": ""})
    assert result.exit_code == 2
    assert "HTTP 401" in result.output
    assert "the server wants an API key: set OPENAI_API_KEY or --api-key-env" in result.output
    assert "check the --servers URLs" not in result.output


def test_local_model_flag_wins_over_base_url():
    assert servers_from_env(None, {"OPENAI_BASE_URL": "http://h:8000/v1"}) == ["http://h:8000/v1"]
    assert servers_from_env("m.gguf", {"OPENAI_BASE_URL": "http://h:8000/v1"}) == []  # type: ignore[arg-type]
    assert servers_from_env(None, {}) == []


def test_key_resolution_order_and_no_key_for_the_embedded_server():
    env = {"OPENAI_API_KEY": "sk-env", "MINE": "sk-mine"}
    assert resolve_api_key("MINE", embedded=False, env=env).value == "sk-mine"
    assert resolve_api_key(None, embedded=False, env=env).value == "sk-env"
    assert resolve_api_key(None, embedded=True, env=env).value is None
    assert "sk-env" not in repr(resolve_api_key(None, embedded=False, env=env))
    with pytest.raises(ConfigError, match="MISSING"):
        resolve_api_key("MISSING", embedded=False, env=env)
