"""No traceback from any verb on a place it cannot write: read-only (a read-only mount, as
root too), full (a file size limit), gone, or a bucket that refuses. Each verb exits 6 with a
message naming the place and a hint, as generate does; `check`'s 1 stays "a rule failed".
Every verb's docs page lists its exit codes."""

from __future__ import annotations

import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from gen_helpers import run, run_with_read_only, write_prompts
from regen.cli import VERBS, main
from regen.errors import OutputError
from regen.storage.destination import Destination

DOCS = Path(__file__).parent.parent / "docs"
REGEN = [sys.executable, "-m", "regen"]


@pytest.fixture
def finished(tmp_path, fake_server) -> Path:
    write_prompts(tmp_path / "p.jsonl", 6)
    assert run(tmp_path / "p.jsonl", tmp_path / "run", [fake_server().url]).exit_code == 0
    return tmp_path / "run"


def assert_exit_6(result: subprocess.CompletedProcess, names: str) -> None:
    assert result.returncode == 6, result.stderr
    assert f"cannot write {names}" in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("flag", ["--json", "--html", "--per-sample"])
def test_check_into_a_read_only_folder_exits_6_not_1(tmp_path, finished, flag):
    read_only = tmp_path / "ro"
    read_only.mkdir()
    target = read_only / "report.out"
    tokenizer = str(checkfix.qwen_style_dir())
    command = [*REGEN, "check", str(finished), "--tokenizer", tokenizer, flag, str(target)]
    assert_exit_6(run_with_read_only(read_only, command), f"{flag} {target}")


def test_export_into_a_read_only_folder_exits_6(tmp_path, finished):
    read_only = tmp_path / "ro"
    read_only.mkdir()
    out = read_only / "ds"
    command = [*REGEN, "export", str(finished), "-o", str(out), "--format", "sharegpt"]
    assert_exit_6(run_with_read_only(read_only, command), f"--output-dir {out}")


@pytest.mark.parametrize("fmt", ["sharegpt", "tokenized"])  # JSONL; Parquet (its writer thread)
def test_export_onto_a_full_disk_exits_6(tmp_path, finished, fmt):
    out = tmp_path / "ds"

    def small_files() -> None:  # no file may grow past 2 kB: the first data shard fills up
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000, 2_000))

    command = [*REGEN, "export", str(finished), "-o", str(out), "--format", fmt]
    if fmt == "tokenized":
        command += ["--tokenizer", str(checkfix.qwen_style_dir())]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=120, preexec_fn=small_files
    )
    assert_exit_6(result, f"--output-dir {out}")


def test_score_of_a_read_only_run_exits_6(tmp_path, finished):
    tokenizer = str(checkfix.qwen_style_dir())
    command = [*REGEN, "score", str(finished), "--draft", "ngram", "--tokenizer", tokenizer]
    result = run_with_read_only(finished, command)
    assert result.returncode == 6, result.stderr
    assert str(finished / "score") in result.stderr and "Traceback" not in result.stderr


def test_demo_into_a_read_only_folder_exits_6(tmp_path):
    read_only = tmp_path / "ro"
    read_only.mkdir()
    result = run_with_read_only(read_only, [*REGEN, "demo", str(read_only / "examples")])
    assert_exit_6(result, f"DIRECTORY {read_only / 'examples'}")


def test_plan_keeping_its_run_in_a_read_only_folder_exits_6(tmp_path, fake_server):
    write_prompts(tmp_path / "p.jsonl", 8)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    prompts, out = str(tmp_path / "p.jsonl"), str(read_only / "run")
    command = [
        *REGEN,
        "plan",
        "--prompts",
        prompts,
        "--servers",
        fake_server().url,
        "--sample",
        "4",
        "--output-dir",
        out,
    ]
    result = run_with_read_only(read_only, command)
    assert result.returncode == 6, result.stderr
    assert f"cannot write to {read_only / 'run'}" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_with_a_read_only_fleet_file_exits_6_before_starting_a_server(tmp_path, standin_env):
    read_only = tmp_path / "ro"
    read_only.mkdir()
    fleet = read_only / "fleet.json"
    command = [
        *REGEN,
        "serve",
        "--engine",
        "llamacpp",
        "--model",
        "m.gguf",
        "--python",
        standin_env["STANDIN_PYTHON"],
        "--fleet",
        str(fleet),
    ]
    assert_exit_6(run_with_read_only(read_only, command), f"--fleet {fleet}")
    assert not list((tmp_path / "records").iterdir())  # no stand-in engine was started


@pytest.mark.parametrize("verb", ["export", "check"])
def test_a_bucket_that_refuses_exits_6(tmp_path, finished, s3_endpoint, verb):
    """No such bucket: the upload is refused; the message names the URL, never the key."""
    url = "s3://no-such-bucket/x"
    args = (
        ["-o", url, "--format", "sharegpt"]
        if verb == "export"
        else ["--tokenizer", str(checkfix.qwen_style_dir()), "--html", f"{url}/report.html"]
    )
    result = CliRunner().invoke(main, [verb, str(finished), *args])
    assert result.exit_code == 6, result.output
    assert url in result.output and "hint:" in result.output
    assert "testing" not in result.output  # the secret key's value never appears


def test_a_folder_gone_under_a_verb_is_a_message_naming_it(tmp_path):
    folder = tmp_path / "reports"
    destination = Destination(str(folder / "r.json"), "--json")
    gone = r"cannot write --json .*r\.json: its folder is gone"
    with pytest.raises(OutputError, match=gone), destination.local_file() as path:
        folder.rmdir()
        path.write_bytes(b"{}")


@pytest.mark.parametrize("verb", list(VERBS))
def test_every_verbs_page_lists_its_exit_codes(verb):
    """A table under an "Exit codes" heading (generate's is in its page's opening part)."""
    page = (DOCS / f"{verb}.md").read_text()
    found = re.search(r"^(## Exit codes|\*\*Exit codes\*\*)", page, re.MULTILINE)
    assert found, f"docs/{verb}.md does not list its exit codes"
    after = page[found.end() :].split("\n\n|", 1)[1]
    table = "|" + after.split("\n\n", 1)[0]
    assert "| 0 |" in table and "| 2 |" in table
    if verb != "status":  # every verb that writes says what a failed write exits with
        assert "| 6 |" in table
