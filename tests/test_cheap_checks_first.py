"""Cheap checks first, nothing left behind: a typo costs a second, never a server start or a
tokenizer load, and a run that fails before it wrote anything leaves no directory."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from gen_helpers import quick_config, run, write_prompts
from regen.cli import main
from regen.errors import FleetUnavailable, RunStateError
from regen.run.generate import generate


def closed_port() -> int:
    """A loopback port nothing listens on (bound, read, released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_comma_separated_servers_is_a_usage_error_with_the_fix(tmp_path):
    write_prompts(tmp_path / "p.jsonl", 1)
    result = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "-o",
            str(tmp_path / "run"),
            "--servers",
            "http://127.0.0.1:8000,http://127.0.0.1:8001",
        ],
    )
    assert result.exit_code == 2
    assert "separate URLs with spaces" in result.output
    assert "--servers http://127.0.0.1:8000 http://127.0.0.1:8001" in result.output
    assert not (tmp_path / "run").exists()


def test_refused_connection_names_the_port_and_leaves_no_directory(tmp_path):
    write_prompts(tmp_path / "p.jsonl", 2)
    port = closed_port()
    with pytest.raises(FleetUnavailable) as err:
        generate(quick_config(tmp_path / "p.jsonl", tmp_path / "run", [f"http://127.0.0.1:{port}"]))
    assert f"nothing listens on 127.0.0.1:{port}" in err.value.message
    assert "Cannot connect" not in err.value.message  # aiohttp's own words stay out
    assert "regen serve" in (err.value.hint or "") and "embedded" in (err.value.hint or "")
    assert not (tmp_path / "run").exists()  # not a directory holding only run.lock


def test_an_existing_output_dir_is_kept_when_preflight_fails(tmp_path):
    write_prompts(tmp_path / "p.jsonl", 2)
    (tmp_path / "run").mkdir()
    with pytest.raises(FleetUnavailable):
        generate(quick_config(tmp_path / "p.jsonl", tmp_path / "run", ["http://127.0.0.1:9"]))
    assert (tmp_path / "run").is_dir()  # the user's directory, not ours to remove


def test_another_prompt_file_is_refused_before_any_server_is_asked(tmp_path, fake_server):
    write_prompts(tmp_path / "p.jsonl", 3)
    run(tmp_path / "p.jsonl", tmp_path / "run", [fake_server().url])
    (tmp_path / "q.jsonl").write_text(
        '{"id": "x", "messages": [{"role": "user", "content": "hi"}]}\n'
    )
    dead = f"http://127.0.0.1:{closed_port()}"
    # A dead server and a missing GGUF would each fail later: the manifest check comes first.
    for servers, local_model in (([dead], None), ([], tmp_path / "no.gguf")):
        config = quick_config(
            tmp_path / "q.jsonl", tmp_path / "run", servers, local_model=local_model
        )
        with pytest.raises(RunStateError) as err:
            generate(config)
        assert str(tmp_path / "p.jsonl") in err.value.message  # both files are named
        assert "q.jsonl is a different file" in err.value.message
        assert "--allow-changed-input" not in str(err.value)  # not for another file
        assert f"--prompts {tmp_path / 'p.jsonl'}" in (err.value.hint or "")


def test_a_prompt_file_that_grew_suggests_allow_changed_input(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 3)
    run(tmp_path / "p.jsonl", tmp_path / "run", [server.url])
    write_prompts(tmp_path / "p.jsonl", 5)
    with pytest.raises(RunStateError, match="grew") as err:
        run(tmp_path / "p.jsonl", tmp_path / "run", [server.url])
    assert "3 -> 5 lines" in err.value.message
    assert "--allow-changed-input" in (err.value.hint or "")


@pytest.mark.parametrize(
    "args",
    [
        ["status", "RUN"],
        ["check", "RUN", "--tokenizer", "nosuch-owner/never-loaded"],
        ["export", "RUN", "-o", "OUT", "--tokenizer", "nosuch-owner/never-loaded"],
        ["score", "RUN", "--draft", "ngram", "--tokenizer", "nosuch-owner/never-loaded"],
    ],
)
def test_a_missing_run_dir_says_it_does_not_exist(tmp_path, args):
    missing = str(tmp_path / "no-such-run")
    args = [missing if a == "RUN" else str(tmp_path / "out") if a == "OUT" else a for a in args]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert f"{missing} does not exist" in result.output
    assert "not a regen" not in result.output and "Hugging Face" not in result.output
