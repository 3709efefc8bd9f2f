"""The held-out split's draw: per category, by prompt, seeded apart from validation, and
the same whatever order the records come in (a resume). How export and score use it:
test_holdout_verbs.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from gen_helpers import read_lines, run
from holdout_helpers import SIZES, cli, records, split_ids
from regen.finished.holdout import Holdout


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
