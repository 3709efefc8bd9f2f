"""The held-out split: `export --holdout F` and `score --holdout F` draw the same prompts each
on their own, per category, by prompt, whatever order the records come in (a resume)."""

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

from gen_helpers import read_lines, run
from regen.cli import main
from regen.finished.holdout import Holdout

SIZES = {"code": 10, "chat": 20, "math": 7}  # F=0.2: 2, 4 and 1.4 -> 7 of 37 in all


def records(samples: int = 2) -> list[dict]:
    """Prompts of three categories, each answered `samples` times."""
    out = []
    for category, n in SIZES.items():
        for i in range(n):
            for s in range(samples):
                rec = checkfix.completion(
                    f"{category}-{i}", f"Paris, {category} answer {i}.{s}", category=category
                )
                out.append({**rec, "sample": s})
    return out


def cli(*args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def split_ids(out: Path, split: str) -> set[tuple[str, int]]:
    rows = []
    for path in (out / "data").glob(f"*/{split}-*.jsonl"):
        rows += [json.loads(line) for line in path.read_text().splitlines()]
    return {(r["id"], r["sample"]) for r in rows}


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


def test_the_split_is_stratified_and_by_prompt(tmp_path):
    run_dir = checkfix.write_run(tmp_path / "run", records(samples=3))
    out = tmp_path / "out"
    cli(
        "export",
        run_dir,
        "--out",
        out,
        "--format",
        "tokenized",
        "--file-type",
        "jsonl",
        "--tokenizer",
        checkfix.qwen_style_dir(),
        "--holdout",
        "0.2",
    )
    summary = json.loads((out / "regen.json").read_text())["holdout"]
    assert summary["by_category"] == {
        "chat": {"prompts": 20, "held_out": 4},
        "code": {"prompts": 10, "held_out": 2},
        "math": {"prompts": 7, "held_out": 1},
    }
    held = split_ids(out, "holdout")
    prompts = {pid for pid, _ in held}
    assert held == {(pid, s) for pid in prompts for s in range(3)}  # every sample of a prompt
    assert not prompts & {pid for pid, _ in split_ids(out, "train")}
    per_domain = {p.parent.name for p in (out / "data").glob("*/holdout-*.jsonl")}
    assert per_domain == set(SIZES)


@pytest.mark.parametrize("seeds", [(0, 0), (5, 5), (0, 9)])
def test_validation_takes_its_share_of_the_prompts_not_held_out(tmp_path, seeds):
    """The two splits are drawn by different hashes: with the same seed (0 for both by
    default) the held-out prompts were the ones validation would take, and it came out empty."""
    recs = [
        checkfix.completion(f"v{i}", f"Paris, answer {i}.", category=("a", "b")[i % 2])
        for i in range(400)
    ]
    run_dir = checkfix.write_run(tmp_path / "run", recs)
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
        "--val-fraction",
        "0.1",
        "--holdout-seed",
        seeds[0],
        "--split-seed",
        seeds[1],
    )
    splits = {
        name: {pid for pid, _ in split_ids(out, name)}
        for name in ("train", "validation", "holdout")
    }
    assert len(splits["holdout"]) == 80
    assert 16 <= len(splits["validation"]) <= 48  # about 0.1 of the other 320 (32)
    assert sum(map(len, splits.values())) == 400  # each prompt in one split
    assert len(set().union(*splits.values())) == 400


@pytest.mark.parametrize("fraction", [0.05, 0.1, 0.33, 0.5])
def test_each_category_holds_out_its_share(fraction):
    sizes = {"a": 3, "b": 41, "c": 200, "d": 1}
    prompts = [(f"{c}{i}", c) for c, n in sizes.items() for i in range(n)]
    held = Holdout(fraction, seed=3).draw(prompts)
    total = sum(sizes.values())
    assert len(held.ids) == int(fraction * total + 0.5)
    for category, (n, k) in held.counts.items():
        assert n == sizes[category]
        assert int(fraction * n) <= k <= int(fraction * n) + 1
        assert k == sum(1 for pid in held.ids if pid.startswith(category) and pid[1:].isdigit())
    again = Holdout(fraction, seed=3).draw(list(reversed(prompts)) * 2)
    assert again.ids == held.ids and again.digest == held.digest
    assert Holdout(fraction, seed=4).draw(prompts).ids != held.ids


def test_the_split_survives_a_resume_and_another_shard_order(tmp_path, fake_server):
    prompts = tmp_path / "p.jsonl"
    with open(prompts, "wb") as fh:
        for i in range(30):
            line = {
                "id": f"q{i}",
                "messages": [{"role": "user", "content": f"question {i}"}],
                "meta": {"category": ("code", "chat", "math")[i % 3]},
            }
            fh.write(orjson.dumps(line) + b"\n")
    once = tmp_path / "once"
    run(prompts, once, [fake_server().url])
    resumed = tmp_path / "resumed"
    flaky = fake_server(faults=["ok", "400"])  # every other prompt fails, into errors/
    run(prompts, resumed, [flaky.url])
    answered = len(read_lines(resumed, "completions"))
    assert 0 < answered < 30
    early = cli("export", resumed, "--out", tmp_path / "early", "--holdout", "0.1")
    assert f"has answers to {answered} of the 30 prompts" in early  # the split will move
    run(prompts, resumed, [fake_server().url], retry_errors=True)  # the resume answers the rest
    assert len(read_lines(resumed, "completions")) == 30
    orders = [[r["id"] for r in read_lines(d, "completions")] for d in (once, resumed)]
    assert orders[0] != orders[1]  # the records come in another order
    splits = []
    for name, run_dir in (("a", once), ("b", resumed)):
        assert "--holdout:" not in cli(
            "export", run_dir, "--out", tmp_path / name, "--holdout", "0.1"
        )
        splits.append(split_ids(tmp_path / name, "holdout"))
    assert splits[0] == splits[1] and len(splits[0]) == 3


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
