"""The generate command line: server lists, typos, and errors that name the fix."""

from __future__ import annotations

from click.testing import CliRunner

from gen_helpers import assert_exactly_once, write_prompts
from regen.cli import main


def invoke(*args: str):
    return CliRunner().invoke(main, ["generate", *args, "--display", "none"])


def test_servers_take_several_urls_after_one_flag(tmp_path, fake_server):
    a, b = fake_server(seconds_per_token=0.005), fake_server(seconds_per_token=0.005)
    ids = write_prompts(tmp_path / "p.jsonl", 40)
    result = invoke(
        "--servers",
        a.url,
        b.url,
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "--output-dir",
        str(tmp_path / "out"),
        "--concurrency",
        "2",
    )
    assert result.exit_code == 0, result.output
    completions, _ = assert_exactly_once(tmp_path / "out", ids)
    assert {r["meta"]["server"] for r in completions} == {a.url, b.url}


def test_a_mistyped_option_is_an_error_not_ignored(tmp_path):
    result = invoke("--prompts", "p", "--output-dir", "o", "--concurreny", "8")
    assert result.exit_code == 2
    assert "No such option '--concurreny'" in result.output


def test_a_url_without_scheme_names_the_fix(tmp_path):
    write_prompts(tmp_path / "p.jsonl", 1)
    result = invoke(
        "--servers",
        "localhost:30000",
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "--output-dir",
        str(tmp_path / "out"),
    )
    assert result.exit_code == 2
    assert "has no scheme" in result.output and "http://localhost:30000" in result.output


def test_unreachable_server_fails_in_seconds_with_a_hint(tmp_path):
    write_prompts(tmp_path / "p.jsonl", 1)
    result = invoke(
        "--servers",
        "http://127.0.0.1:9",
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "--output-dir",
        str(tmp_path / "out"),
    )
    assert result.exit_code == 5  # a fleet fault, not a usage error: a supervisor may retry
    assert "no server answers" in result.output and "hint:" in result.output
    assert "Traceback" not in result.output
