"""`regen score`'s command line before any model loads: what it says when the tokenizer or
the draft is missing, as `check` says it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from regen.cli import main


def embedded_run(root: Path) -> Path:
    """A run directory as `regen generate` leaves it on the embedded model: its manifest
    says so, and one completion."""
    (root / "completions").mkdir(parents=True)
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    line = {
        "id": "p1",
        "sample": 0,
        "finish_reason": "stop",
        "messages": messages,
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    (root / "completions" / "part-0.jsonl").write_text(json.dumps(line) + "\n")
    manifest = {"config": {"embedded": True, "model": "smollm2-135m-instruct"}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_score_without_tokenizer_names_the_embedded_model_as_check_does(tmp_path):
    run = embedded_run(tmp_path / "run")
    runner = CliRunner()
    scored = runner.invoke(main, ["score", str(run), "--draft", "ngram"])
    checked = runner.invoke(main, ["check", str(run)])
    assert scored.exit_code == 2 and checked.exit_code == 2
    assert "pass --tokenizer embedded" in scored.output, scored.output
    hint = [line for line in checked.output.splitlines() if "hint:" in line]
    assert hint and hint[0] in scored.output


def test_score_without_a_draft_says_so_before_the_tokenizer_loads(tmp_path, monkeypatch):
    import regen.check

    def never(*args, **kwargs):
        raise AssertionError("the tokenizer was loaded")

    monkeypatch.setattr(regen.check.Encoder, "load", never)
    run = embedded_run(tmp_path / "run")
    result = CliRunner().invoke(main, ["score", str(run), "--tokenizer", "embedded"])
    assert result.exit_code == 2, result.output
    assert "no draft to score with" in result.output and "--draft ngram" in result.output


@pytest.mark.parametrize("args", [["--draft", "ngram"], []])
def test_score_of_a_missing_run_says_so_first(tmp_path, args):
    result = CliRunner().invoke(main, ["score", str(tmp_path / "nowhere"), *args])
    assert result.exit_code == 2 and "does not exist" in result.output, result.output


def _tree(root: Path) -> dict[str, bytes]:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def test_output_dir_scores_a_run_that_is_left_untouched(tmp_path):
    """--output-dir takes RUN/score's place: the files go there, a second call resumes from
    them, and the run (read-only here; tests run as root, which writes through a chmod, so
    the run's own files are compared) gets no byte."""
    run = embedded_run(tmp_path / "run")
    before = _tree(run)
    run.chmod(0o555)
    out = tmp_path / "elsewhere"
    args = [
        "score",
        str(run),
        "--draft",
        "ngram",
        "--tokenizer",
        "embedded",
        "--all",
        "--output-dir",
        str(out),
    ]
    try:
        first = CliRunner().invoke(main, [*args, "--json"])
        again = CliRunner().invoke(main, args)
    finally:
        run.chmod(0o755)
    assert first.exit_code == 0, first.output
    assert _tree(run) == before and not (run / "score").exists()
    draft = json.loads(first.output)["drafts"][0]
    assert draft["scored_now"] == 1 and draft["rows_file"].startswith(str(out))
    assert (out / "score.json").is_file() and (out / "score.txt").is_file()
    assert again.exit_code == 0, again.output
    assert f"written: {out}/score.json and score.txt" in again.output
    assert json.loads((out / "score.json").read_text())["drafts"][0]["scored_now"] == 0
