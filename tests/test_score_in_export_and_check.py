"""What reads a score: `regen export` selecting and ordering rows by it, and `regen check`'s
HTML report showing its acceptance section, on the embedded SmolLM2's greedy answers."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from regen.cli import main
from regen.finished.score_rows import read_rows
from regen.score import score_run
from regen.score.ngram import NgramDraft
from score_helpers import PROMPTS, ROWS, settings

pytestmark = pytest.mark.model


def test_export_selects_and_orders_by_score(run, encoder, tmp_path):
    from regen.score import write_report

    report = score_run(run, [NgramDraft()], encoder, settings(), tmp_path / "score")
    score_json, _ = write_report(report, tmp_path / "score")
    rows = {r["id"]: r["acceptance"] for r in read_rows(report.drafts[0].rows_file)}
    cut = sorted(rows.values())[ROWS // 2]
    out = tmp_path / "export"
    result = CliRunner().invoke(
        main,
        [
            "export",
            str(run),
            "-o",
            str(out),
            "--format",  # a tokenised one: the answers hit the cap (see test_export_cut.py)
            "speculators",
            "--tokenizer",
            "embedded",
            "--score",
            str(score_json),
            "--max-acceptance",
            str(cut),
            "--order",
            "hard-first",
        ],
    )
    assert result.exit_code == 0, result.output
    files = sorted(out.glob("data/**/*.jsonl"))
    per_file = [[json.loads(line)["id"] for line in f.read_text().splitlines()] for f in files]
    ids = [i for file_ids in per_file for i in file_ids]
    assert set(ids) == {i for i, a in rows.items() if a <= cut}
    for file_ids in per_file:  # one file per domain, each hardest first
        assert [rows[i] for i in file_ids] == sorted(rows[i] for i in file_ids)
    dropped = ROWS - len(ids)
    assert dropped > 0 and f"dropped above acceptance {cut}" in result.output


def test_check_html_report_shows_the_acceptance_section(run, identity, encoder, tmp_path):
    from regen.score import write_report

    write_report(score_run(run, [identity], encoder, settings(), run / "score"), run / "score")
    html = tmp_path / "report.html"
    result = CliRunner().invoke(
        main, ["check", str(run), "--tokenizer", "embedded", "--html", str(html)]
    )
    assert result.exit_code in (0, 1), result.output  # the verdict does not matter here
    page = html.read_text()
    assert "Acceptance (regen score, k=8)" in page
    assert 'aria-label="tau(8) by category' in page and "Acceptance per draft position" in page
    for category in PROMPTS:
        assert f"{category} (2)" in page  # a bar per category, labelled with its rows
