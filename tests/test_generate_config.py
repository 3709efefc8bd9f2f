"""regen generate's setup against fake servers: a server that does not answer fails fast
by name, the API key is sent and never written, and paths that cannot be used are
config errors, with nothing written outside the output dir."""

from __future__ import annotations

import os

import pytest

from gen_helpers import run, write_prompts
from regen.errors import ConfigError, FleetUnavailable
from regen.fleet.server import Timeouts
from regen.run.generate import generate


def test_preflight_fails_fast_naming_the_server(tmp_path, fake_server):
    good = fake_server()
    write_prompts(tmp_path / "p.jsonl", 1)
    with pytest.raises(FleetUnavailable, match=r"127\.0\.0\.1:9") as err:
        run(tmp_path / "p.jsonl", tmp_path / "out", ["http://127.0.0.1:9"])
    assert "/v1/models" in err.value.hint
    with pytest.raises(ConfigError, match="'other' is not served"):
        run(tmp_path / "p.jsonl", tmp_path / "out2", [good.url], model="other")


def test_api_key_is_sent_and_never_written(tmp_path, fake_server, monkeypatch):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 2)
    monkeypatch.setenv("MY_KEY", "sekret-123")
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], api_key_env="MY_KEY")
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert b"sekret-123" not in path.read_bytes(), path
    monkeypatch.delenv("MY_KEY")
    with pytest.raises(ConfigError, match="MY_KEY"):
        run(tmp_path / "p.jsonl", tmp_path / "out3", [server.url], api_key_env="MY_KEY")


def test_missing_prompt_file_and_unwritable_output_are_config_errors(tmp_path, fake_server):
    server = fake_server()
    with pytest.raises(ConfigError, match="does not exist"):
        run(tmp_path / "missing.jsonl", tmp_path / "out", [server.url])
    write_prompts(tmp_path / "p.jsonl", 1)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r"cannot write --output-dir .*file is a file"):
        generate(quick_config_for(tmp_path / "p.jsonl", blocker / "sub", server.url))


def quick_config_for(prompts, output, url):
    from gen_helpers import quick_config

    return quick_config(prompts, output, [url], timeouts=Timeouts(request=5))


def test_no_default_path_outside_the_output_dir(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 2)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        run(tmp_path / "p.jsonl", tmp_path / "deep" / "new" / "out", [server.url])
    finally:
        os.chdir(cwd)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "p.jsonl"]
