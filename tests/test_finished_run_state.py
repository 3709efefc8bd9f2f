"""What a report over a run says before its figures (issue 54): a line of a shard that is not
JSON is no sample (named by file and line, in no rule's count, never `read`), and a run that
is not finished (a --shard part that never ran) is said to be so, in text, JSON and HTML."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from gen_helpers import run, write_prompts
from regen.cli import main
from regen.format.part import Part


def torn_run(root: Path) -> Path:
    """Ten healthy completions with a line torn mid-record between the fifth and sixth (a
    crash, then another writer appending after it): line 6 of the shard."""
    lines = [json.dumps(r) for r in checkfix.healthy(10)]
    lines.insert(5, lines[4][:60])
    folder = root / "completions"
    folder.mkdir(parents=True)
    (folder / "00000.jsonl").write_text("\n".join(lines) + "\n")
    return root


def check(run_dir: Path, tmp_path: Path, *extra: str):
    args = ["check", str(run_dir), "--tokenizer", str(checkfix.qwen_style_dir())]
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, [*args, "--json", str(out), *extra])
    assert result.exit_code in (0, 1), result.output
    return result, orjson.loads(out.read_bytes())


def test_a_torn_line_in_a_shard_is_no_sample_and_is_named(tmp_path):
    result, report = check(torn_run(tmp_path / "run"), tmp_path)
    assert report["overall"]["samples"] == 10
    rules = {r["rule"]: r for r in report["rules"]}
    for name in ("mask_errors", "degenerate", "empty_answer"):  # the torn line failed these
        assert (rules[name]["count"], rules[name]["of"]) == (0, 10)
    assert report["failed_rules"] == [] and report["error_examples"] == []
    [bad] = report["lines_not_json"]["first"]
    assert bad["file"].endswith("completions/00000.jsonl") and bad["line"] == 6
    assert report["lines_not_json"]["count"] == 1
    assert "00000.jsonl line 6: not JSON" in result.output and "verdict: PASS" in result.output


def test_export_reads_ten_of_a_torn_shard_and_names_the_eleventh_line(tmp_path):
    done = CliRunner().invoke(
        main, ["export", str(torn_run(tmp_path / "run")), "-o", str(tmp_path / "ds")]
    )
    assert done.exit_code == 0, done.output
    assert "read 10 completions; dropped: none" in done.output
    assert "1 line(s) of the runs are not JSON" in done.output and "line 6" in done.output


@pytest.fixture
def half_run(tmp_path, fake_server) -> Path:
    write_prompts(tmp_path / "p.jsonl", 20)
    out = tmp_path / "half"
    assert run(tmp_path / "p.jsonl", out, [fake_server().url], part=Part(0, 2)).exit_code == 0
    return out


def test_check_says_a_run_with_a_part_never_run_is_not_finished(half_run, tmp_path):
    html = tmp_path / "r.html"
    result, report = check(half_run, tmp_path, "--html", str(html))
    [state] = report["unfinished_runs"]
    assert state["not_started"] == ["1/2"] and state["left"] > 0
    assert state["done"] == report["overall"]["samples"] and state["items"] == 20
    assert f"{half_run} is NOT FINISHED" in result.output.splitlines()[1]  # under the title
    assert "--shard 1/2 never ran" in result.output
    assert f"items only: {half_run} is NOT FINISHED" in result.output  # beside the verdict
    page = html.read_text()
    assert "id='warnings'" in page and "NOT FINISHED" in page
    assert page.index("NOT FINISHED") < page.index("<table")  # before any figure


def test_a_finished_run_says_nothing_of_the_kind(tmp_path, fake_server):
    write_prompts(tmp_path / "p.jsonl", 6)
    assert run(tmp_path / "p.jsonl", tmp_path / "run", [fake_server().url]).exit_code == 0
    result, report = check(tmp_path / "run", tmp_path)
    assert report["unfinished_runs"] == [] and report["lines_not_json"] is None
    assert "NOT FINISHED" not in result.output and "WARNING" not in result.output
