"""`regen export`'s dataset on disk: the validation split, parquet shards the card lists,
the card's acceptance profile, merging into an older layout, and rows kept on disk."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets  # offline, with a throwaway cache: see conftest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from export_helpers import cli, data_file, rows_of
from export_helpers import run as run  # the fixture
from regen.export.files import MARKER


def test_validation_split_is_by_prompt_and_seeded(tmp_path):
    rows = []
    for p in range(20):
        for k in range(3):  # --samples-per-prompt 3
            rec = checkfix.completion(f"p{p}", f"Answer {k} to prompt {p}.")
            rec["sample"] = k
            rows.append(rec)
    run = checkfix.write_run(tmp_path / "run", rows)
    splits = {}
    for seed in ("0", "1"):
        out = tmp_path / f"s{seed}"
        cli("export", run, "--out", out, "--val-fraction", "0.4", "--split-seed", seed)
        ds = datasets.load_dataset(str(out))
        by_prompt: dict[str, set[str]] = {}
        for split in ds:
            for row_id in ds[split]["id"]:
                by_prompt.setdefault(row_id, set()).add(split)
        assert all(len(s) == 1 for s in by_prompt.values())  # never in both splits
        splits[seed] = {p: s.pop() for p, s in by_prompt.items()}
    assert splits["0"] != splits["1"]  # the seed chooses another validation set


def test_parquet_is_cut_into_shards_that_the_card_lists(run, tmp_path, monkeypatch):
    from huggingface_hub import DatasetCard

    import regen.export.files as files

    monkeypatch.setattr(files, "SHARD_BYTES", 2000)
    monkeypatch.setattr(files, "ROW_GROUP", 5)
    out = tmp_path / "tok"
    cli(
        "export",
        run,
        "--out",
        out,
        "--format",
        "tokenized",
        "--tokenizer",
        checkfix.qwen_style_dir(),
    )
    shards = sorted(p.name for p in (out / "data" / "qa").iterdir())
    assert len(shards) > 2 and shards[0] == f"train-00000-of-{len(shards):05d}.parquet"
    [default] = [
        c for c in DatasetCard.load(out / "README.md").data.configs if c["config_name"] == "default"
    ]
    assert default["data_files"][0]["path"] == [f"data/qa/{name}" for name in shards]
    assert datasets.load_dataset(str(out))["train"].num_rows == 33


def test_the_card_carries_the_acceptance_profile_of_a_scored_run(run, tmp_path):
    """`regen score` writes RUN/score/score.json; the card shows tau per group and k."""
    at = [{"k": k, "tau": {"value": 1 + k / 2, "ci95": None}} for k in (1, 3)]
    score = {
        "run": str(run),
        "by": "category",
        "k": [1, 3],
        "drafts": [
            {
                "name": "ngram",
                "groups": {"qa": {"rows": 33, "top1_match": {"value": 0.41}, "by_k": at}},
            }
        ],
    }
    (run / "score").mkdir()
    (run / "score" / "score.json").write_text(json.dumps(score))
    out = tmp_path / "scored"
    cli("export", run, "--out", out)
    card = (out / "README.md").read_text()
    assert "## Acceptance (`regen score`)" in card and "Draft `ngram`" in card
    assert "| qa | 33 | 0.41 | 1.5 | 2.5 |" in card


def test_an_export_in_the_layout_before_the_card_merges_into_the_new_one(run, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    (old / MARKER).write_text("{}")
    earlier = {
        "id": "earlier#0",
        "conversations": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello."},
        ],
    }
    (old / "train.jsonl").write_text(json.dumps(earlier) + "\n")
    cli("export", run, "--out", old, "--merge-into", old)
    assert not (old / "train.jsonl").exists()
    rows = rows_of(data_file(old))
    assert len({r["id"] for r in rows}) == 33  # 32 of the run (not the cut one) + the earlier
    [kept] = [r for r in rows if r["id"] == "earlier"]  # upgraded: the sample in its own field
    assert kept == {"id": "earlier", "sample": 0, **{k: earlier[k] for k in ("conversations",)}}


def test_hard_first_keeps_rows_on_disk_not_in_memory(tmp_path):
    """--order hard-first holds every kept row until the last is read: on disk, with only
    (acceptance, order, offset) per row in memory, read back lowest acceptance first."""
    import tracemalloc

    from regen.export.by_score import HeldAside

    acceptance = {f"r{i}": (i * 37 % 100) / 100 for i in range(200)}
    held = HeldAside(lambda key: acceptance.get(key[0], 2.0), tmp_path)
    tracemalloc.start()
    for i in range(200):  # 200 rows of 250 KB: 50 MB of rows
        raw = {"id": f"r{i}", "sample": 0, "messages": [{"role": "user", "content": "x" * 250_000}]}
        held.add((raw["id"], 0), raw)
        del raw
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5 * 2**20, f"{peak / 2**20:.1f} MB held while adding"
    order = [raw["id"] for raw in held.hardest_first()]
    held.close()
    assert order == sorted(acceptance, key=lambda rid: (acceptance[rid], int(rid[1:])))
    assert not list(tmp_path.iterdir())  # the file never had a name


def test_load_dataset_of_a_re_export_reads_the_new_rows_not_datasets_cache(tmp_path):
    """`datasets` caches a local folder by its name and its card's configs: a second export
    to the same folder (or one of the same name elsewhere) must not read the first's rows."""
    seen = []
    for n in (12, 5):
        rows = [checkfix.completion(f"p{i}", f"Answer {i} of {n}.") for i in range(n)]
        run = checkfix.write_run(tmp_path / f"run{n}", rows)
        for out in (tmp_path / "data", tmp_path / f"elsewhere{n}" / "data"):
            cli("export", run, "--out", out, "--overwrite")
            seen.append((n, datasets.load_dataset(str(out), split="train").num_rows))
    assert seen == [(12, 12), (12, 12), (5, 5), (5, 5)]
