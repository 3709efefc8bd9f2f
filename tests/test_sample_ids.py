"""A sample is named by its prompt's id exactly as the prompt file gave it, with the sample
number in a field of its own: in every export format, check's reports and score's rows.
What earlier versions wrote (`"id": "ID#SAMPLE"`) is still read where a merge builds on an
old export or an export selects by old score rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets  # offline, with a throwaway cache: see conftest
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.cli import main
from regen.export.formats import FORMATS
from regen.score.results import RowsFile, row_line
from regen.score.tokens import TokenRow

IDS = ("greet-1", "q#7")  # as a user writes them; the second holds a `#` of its own


def samples(ids=IDS, n: int = 2, changed: int | None = None) -> list[dict]:
    """`n` samples of each prompt; `changed`: that sample's answer differs (a second run)."""
    rows = []
    for pid in ids:
        for k in range(n):
            again = " (again)" if k == changed else ""
            rec = checkfix.completion(pid, f"Answer {k} to {pid}{again}.", category="qa")
            rec["sample"] = k
            rows.append(rec)
    return rows


def cli(*args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def data_file(out: Path) -> Path:
    return out / "data" / "default" / "train-00000-of-00001.jsonl"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def exported(out: Path) -> list[dict]:
    """Every row, read the way a trainer reads it: `datasets` with the card's configs."""
    ds = datasets.load_dataset(str(out))
    return [row for split in ds for row in ds[split].to_list()]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_keeps_the_id_as_given_and_the_sample_apart(tmp_path, fmt):
    run = checkfix.write_run(tmp_path / "run", samples())
    out = tmp_path / "out"
    cli("export", run, "--out", out, "--format", fmt, "--tokenizer", checkfix.qwen_style_dir())
    expected = {(pid, k) for pid in IDS for k in range(2)}
    if fmt == "openai-batch":  # one custom_id per line, as the batch format needs
        rows = lines(data_file(out))
        assert {(r["prompt_id"], r["sample"]) for r in rows} == expected
        assert sorted(r["custom_id"] for r in rows) == ["greet-1", "greet-1#1", "q#7", "q#7#1"]
        return
    rows = exported(out)
    assert sorted((r["id"], r["sample"]) for r in rows) == sorted(expected)


def test_a_merge_of_two_runs_keeps_each_id_and_sample_once(tmp_path):
    ids = [f"p{i}" for i in range(12)]
    first = checkfix.write_run(tmp_path / "a", samples(ids))
    second = checkfix.write_run(tmp_path / "b", samples(ids, 3, changed=1))
    out, report = tmp_path / "out", tmp_path / "merge.json"
    cli("export", first, "--out", out, "--val-fraction", "0.3")
    cli(
        "export",
        second,
        "--out",
        out,
        "--merge-into",
        out,
        "--val-fraction",
        "0.3",
        "--report",
        report,
    )
    outcomes = json.loads(report.read_text())["outcomes"]
    assert outcomes == {"skipped_same": 12, "replaced": 12, "added": 12}
    ds = datasets.load_dataset(str(out))
    rows = {(r["id"], r["sample"]): (split, r) for split in ds for r in ds[split].to_list()}
    assert len(rows) == sum(ds[s].num_rows for s in ds) == 36  # each (id, sample) once
    assert set(rows) == {(p, k) for p in ids for k in range(3)}
    assert rows[("p3", 1)][1]["conversations"][-1]["content"].endswith("(again).")
    for p in ids:  # the samples of a prompt stay in one split, the earlier export's too
        assert len({rows[(p, k)][0] for k in range(3)}) == 1
    assert {split for split, _ in rows.values()} == {"train", "validation"}


def to_old_shape(row: dict, fmt: str) -> dict:
    """A row as regen wrote it before the sample had its own field."""
    if fmt == "openai-batch":
        return {k: v for k, v in row.items() if k not in ("prompt_id", "sample")}
    return {
        "id": f"{row['id']}#{row['sample']}",
        **{k: v for k, v in row.items() if k not in ("id", "sample")},
    }


@pytest.mark.parametrize("fmt", ["specforge", "sharegpt-llamafactory", "openai-batch"])
def test_a_run_merges_into_an_export_an_earlier_version_wrote(tmp_path, fmt):
    old = tmp_path / "old"
    cli("export", checkfix.write_run(tmp_path / "a", samples()), "--out", old, "--format", fmt)
    path = data_file(old)
    path.write_text("".join(json.dumps(to_old_shape(r, fmt)) + "\n" for r in lines(path)))
    report = tmp_path / "merge.json"
    second = checkfix.write_run(tmp_path / "b", samples(n=3, changed=1))
    cli("export", second, "--out", old, "--merge-into", old, "--format", fmt, "--report", report)
    assert json.loads(report.read_text())["outcomes"] == {
        "skipped_same": 2,
        "replaced": 2,
        "added": 2,
    }
    rows = lines(path)
    named = "prompt_id" if fmt == "openai-batch" else "id"
    keys = [(r[named], r["sample"]) for r in rows]
    assert len(rows) == 6 and len(set(keys)) == 6  # upgraded: each (id, sample) once
    assert ("greet-1", 0) in keys and ("greet-1", 2) in keys
    if fmt != "openai-batch":
        assert sorted(keys) == sorted((p, k) for p in IDS for k in range(3))
        assert exported(old)  # the card of the merged export still loads


def score_json(tmp_path: Path, rows: list[dict]) -> Path:
    """A `regen score` result: score.json naming one draft's rows file."""
    rows_file = tmp_path / "score" / "ngram" / "rows.jsonl"
    rows_file.parent.mkdir(parents=True)
    rows_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "score" / "score.json"
    path.write_text(json.dumps({"drafts": [{"name": "ngram", "rows_file": str(rows_file)}]}))
    return path


@pytest.mark.parametrize("old", [True, False], ids=["old-rows", "rows"])
def test_export_selects_by_score_rows_old_and_new(tmp_path, old):
    run = checkfix.write_run(tmp_path / "run", samples())
    acceptance = {("greet-1", 0): 0.9, ("greet-1", 1): 0.2, ("q#7", 1): 0.5}
    rows = [{"id": f"{p}#{k}"} if old else {"id": p, "sample": k} for p, k in acceptance]
    for row, value in zip(rows, acceptance.values(), strict=True):
        row.update(acceptance=value, match="10")
    out = tmp_path / "out"
    cli(
        "export",
        run,
        "--out",
        out,
        "--score",
        score_json(tmp_path, rows),
        "--max-acceptance",
        "0.6",
        "--order",
        "hard-first",
    )
    kept = [(r["id"], r["sample"]) for r in lines(data_file(out))]
    assert kept == [("greet-1", 1), ("q#7", 1), ("q#7", 0)]  # hardest first, unscored last


def test_score_rows_name_the_sample_apart_and_resume_from_old_rows(tmp_path):
    folder = tmp_path / "ngram"
    folder.mkdir()
    (folder / "rows.jsonl").write_text(json.dumps({"id": "greet-1#1", "match": "1"}) + "\n")
    rows = RowsFile(folder, {"draft": "ngram"})
    rows.append(row_line(TokenRow("q#7", 0, [1, 2, 3], 1, {}, False), "10"))
    rows.close()
    written = lines(folder / "rows.jsonl")[-1]
    assert (written["id"], written["sample"]) == ("q#7", 0)
    assert rows.done() == {("greet-1", 1), ("q#7", 0)}  # the old line is not scored again


def test_check_names_a_sample_by_its_id_and_sample_number(tmp_path):
    broken = {"id": "greet-1", "sample": 1, "messages": [{"role": "user", "content": "hi"}]}
    run = checkfix.write_run(tmp_path / "run", [*checkfix.healthy(10), broken])
    report, per_sample = tmp_path / "report.json", tmp_path / "samples.jsonl"
    result = CliRunner().invoke(
        main,
        [
            "check",
            str(run),
            "--tokenizer",
            str(checkfix.qwen_style_dir()),
            "--show",
            "1",
            "--json",
            str(report),
            "--per-sample",
            str(per_sample),
        ],
    )
    assert result.exit_code in (0, 1), result.output
    [example] = json.loads(report.read_text())["error_examples"]
    assert (example["id"], example["sample"], example["error"]) == ("greet-1", 1, "no_assistant")
    assert "  greet-1 (sample 1): [no_assistant]" in result.output
    assert "--- web0 (sample 0)" in result.output
    assert "#0" not in result.output and "#1" not in result.output
    per_line = {(s["id"], s["sample"]) for s in lines(per_sample)}
    assert ("greet-1", 1) in per_line and ("web0", 0) in per_line
