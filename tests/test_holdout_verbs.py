"""`export --holdout F` and `score --holdout F` draw the same prompts each on their own,
from one run or two; trainers read only the train split; and each verb refuses a split
it cannot draw or an export it would merge wrongly into."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets  # offline, with a throwaway cache: see conftest
import orjson
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from holdout_helpers import cli, records, split_ids
from regen.cli import main


def test_export_and_score_hold_out_the_same_prompts(tmp_path):
    run_dir = checkfix.write_run(tmp_path / "run", records())
    out = tmp_path / "out"
    cli(
        "export",
        run_dir,
        "--out",
        out,
        "--format",
        "sharegpt",
        "--holdout",
        "0.2",
        "--holdout-seed",
        "7",
    )
    held, train = split_ids(out, "holdout"), split_ids(out, "train")
    assert len(held) == 2 * 7 and len(train) == 2 * 30 and not held & train
    result = CliRunner().invoke(
        main,
        [
            "score",
            str(run_dir),
            "--draft",
            "ngram",
            "--tokenizer",
            str(checkfix.qwen_style_dir()),
            "--holdout",
            "0.2",
            "--holdout-seed",
            "7",
            "--all",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.output)
    assert report["split"] == "holdout"
    rows_file = Path(report["drafts"][0]["rows_file"])
    scored = {(r["id"], r["sample"]) for r in map(json.loads, rows_file.read_text().splitlines())}
    assert scored == held
    assert report["drafts"][0]["groups"]["(overall)"]["rows"] == len(held)
    card = json.loads((out / "regen.json").read_text())["holdout"]
    assert card["digest"] == report["holdout"]["digest"]
    assert "## Held-out split" in (out / "README.md").read_text()
    # the other side, and both, from the same results file (nothing scored twice)
    for split, n in (("train", len(train)), ("all", len(train) + len(held))):
        again = CliRunner().invoke(
            main,
            [
                "score",
                str(run_dir),
                "--draft",
                "ngram",
                "--tokenizer",
                str(checkfix.qwen_style_dir()),
                "--holdout",
                "0.2",
                "--holdout-seed",
                "7",
                "--split",
                split,
                "--all",
                "--json",
            ],
        )
        assert again.exit_code == 0, again.output
        report = orjson.loads(again.output)
        assert report["split"] == split
        assert report["drafts"][0]["groups"]["(overall)"]["rows"] == n


def test_an_export_of_two_runs_holds_out_what_score_draws_on_each(tmp_path):
    first = checkfix.write_run(tmp_path / "one", records(samples=1)[:20])  # code, chat
    second = checkfix.write_run(tmp_path / "two", records(samples=1)[20:])  # chat, math
    cli(
        "export",
        first,
        second,
        "--out",
        tmp_path / "out",
        "--format",
        "sharegpt",
        "--holdout",
        "0.2",
    )
    held = split_ids(tmp_path / "out", "holdout")
    scored = set()
    for run_dir in (first, second):
        report = orjson.loads(
            cli(
                "score",
                run_dir,
                "--draft",
                "ngram",
                "--tokenizer",
                checkfix.qwen_style_dir(),
                "--holdout",
                "0.2",
                "--all",
                "--json",
            )
        )
        rows = Path(report["drafts"][0]["rows_file"]).read_text().splitlines()
        scored |= {(r["id"], r["sample"]) for r in map(json.loads, rows)}
    assert scored == held and len(held) == 4 + 3  # 20 prompts, then 17


def test_trainers_still_read_train_only(tmp_path):
    from specforge.data.prompt_builder import prepare_prompt_tasks

    run_dir = checkfix.write_run(tmp_path / "run", records(samples=1))
    out = tmp_path / "tok"
    cli(
        "export",
        run_dir,
        "--out",
        out,
        "--format",
        "specforge-tokenized",
        "--tokenizer",
        checkfix.qwen_style_dir(),
        "--holdout",
        "0.2",
    )
    train = out / "data" / "default" / "train-00000-of-00001.jsonl"
    tasks = prepare_prompt_tasks(
        train,
        None,
        chat_template=None,
        max_length=4096,
        is_preformatted=False,
        train_only_last_turn=False,
        cache_dir=None,
        cache_key=None,
        num_proc=1,
    )
    assert len(tasks) == 30
    ds = datasets.load_dataset(str(out))
    assert {s: ds[s].num_rows for s in ds} == {"train": 30, "holdout": 7}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--split", "train"], "--split train needs the held-out fraction"),
        (["--holdout", "1.5"], "--holdout 1.5 is not a fraction"),
    ],
)
def test_score_refuses_a_split_it_cannot_draw(tmp_path, args, says):
    run_dir = checkfix.write_run(tmp_path / "run", records(samples=1))
    result = CliRunner().invoke(main, ["score", str(run_dir), "--from-engine", *args])
    assert result.exit_code == 2 and says in result.output, result.output


def test_export_refuses_a_holdout_merged_into_an_earlier_export(tmp_path):
    run_dir = checkfix.write_run(tmp_path / "run", records(samples=1))
    cli("export", run_dir, "--out", tmp_path / "out")
    result = CliRunner().invoke(
        main,
        [
            "export",
            str(run_dir),
            "--out",
            str(tmp_path / "out"),
            "--merge-into",
            str(tmp_path / "out"),
            "--holdout",
            "0.1",
        ],
    )
    assert result.exit_code == 2 and "export the runs together" in result.output, result.output


def test_a_corrupt_line_inside_a_shard_is_counted_by_score_and_export_not_a_traceback(tmp_path):
    """A line that is not JSON in the middle of a shard (a disk fault, an edit): both verbs
    draw the same split over the readable rows, count the bad line and name its file and
    line; neither crashes."""
    run_dir = checkfix.write_run(tmp_path / "run", records())
    shard = run_dir / "completions" / "00000.jsonl"
    lines = shard.read_text().splitlines(keepends=True)
    lines.insert(5, '{"id": "torn", "messages": [{"role": "us\n')
    shard.write_text("".join(lines))
    out = tmp_path / "out"
    exported = cli("export", run_dir, "--out", out, "--format", "sharegpt", "--holdout", "0.2")
    assert "1 line(s) of the runs are not JSON" in exported and "00000.jsonl line 6" in exported
    tokenizer = str(checkfix.qwen_style_dir())
    args = ["score", str(run_dir), "--draft", "ngram", "--tokenizer", tokenizer]
    result = CliRunner().invoke(main, [*args, "--holdout", "0.2", "--all", "--json"])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.output)
    assert report["invalid_records"] == {"bad_json": 1}
    (where,) = report["invalid_lines"]
    assert where["file"].endswith("completions/00000.jsonl") and where["line"] == 6
    shown = CliRunner().invoke(main, [*args, "--holdout", "0.2", "--all"])
    assert "00000.jsonl line 6: not JSON" in shown.output, shown.output
    rows_file = Path(report["drafts"][0]["rows_file"])
    scored = {(r["id"], r["sample"]) for r in map(json.loads, rows_file.read_text().splitlines())}
    assert scored == split_ids(out, "holdout")
