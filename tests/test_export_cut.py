"""An answer cut at the cap, as each trainer's own loader reads the export (issue 57): the
tokenised targets carry regen's mask, which ends where the model stopped; the conversation
targets, whose trainers render and supervise an end-of-turn after every assistant turn, leave
the row out and say so (and their own code shows why)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets  # offline, with a throwaway cache: see conftest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

import trainer_readers
from export_helpers import cli, data_file, rows_of
from export_helpers import run as run  # the fixture: its row "cut" hit the cap at "Paris is"
from regen.export import make_format
from regen.finished.record import Completion

END = "<|im_end|>"


def assert_ends_at_the_cut(ids: list[int], mask: list[int]) -> None:
    """The row stops with the last answer token, supervised; no end-of-turn anywhere after
    the answer began."""
    tok = checkfix.load("qwen")
    start = mask.index(1)
    assert tok.decode(ids[start:]).endswith("Paris is") and mask[-1] == 1
    assert tok.convert_tokens_to_ids(END) not in ids[start:]


def test_specforge_and_speculators_read_a_cut_row_without_its_end_of_turn(run, tmp_path):
    from specforge.data.prompt_builder import prepare_prompt_tasks
    from speculators.data_generation.preprocessing import (
        build_speculator_training_dataset,
        load_raw_dataset,
    )

    qwen = checkfix.qwen_style_dir()
    cli(
        "export",
        run,
        "--out",
        tmp_path / "sf",
        "--format",
        "specforge-tokenized",
        "--tokenizer",
        qwen,
    )
    tasks = prepare_prompt_tasks(
        data_file(tmp_path / "sf"),
        None,
        chat_template=None,
        max_length=4096,
        is_preformatted=False,
        train_only_last_turn=False,
        cache_dir=None,
        cache_key=None,
        num_proc=1,
    )
    [cut] = [t["payload"] for t in tasks if t["payload"]["input_ids"] == _cut_ids(tmp_path / "sf")]
    assert_ends_at_the_cut(cut["input_ids"], cut["loss_mask"])
    cli("export", run, "--out", tmp_path / "sp", "--format", "speculators", "--tokenizer", qwen)
    raw, _ = load_raw_dataset(str(tmp_path / "sp" / "data" / "*" / "train-*.jsonl"))
    rows = build_speculator_training_dataset(
        raw, checkfix.load("qwen"), max_length=4096, num_proc=1
    )
    [row] = [r for r in rows if r["input_ids"].tolist() == cut["input_ids"]]
    assert_ends_at_the_cut(row["input_ids"].tolist(), row["loss_mask"].tolist())


def _cut_ids(out: Path) -> list[int]:
    return next(r["input_ids"] for r in rows_of(data_file(out)) if r["id"] == "cut")


def test_the_tokenized_parquet_holds_a_cut_row_without_its_end_of_turn(run, tmp_path):
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
    [row] = [r for r in datasets.load_dataset(str(out))["train"] if r["id"] == "cut"]
    assert_ends_at_the_cut(row["input_ids"], row["loss_mask"])


def test_conversation_targets_leave_a_cut_row_out_and_say_why(run, tmp_path, monkeypatch):
    """Their trainers render the conversation themselves: axolotl's own strategy (README's
    settings) on the row regen would write labels the `<|im_end|>` after the cut answer."""
    for fmt in ("specforge", "sharegpt-llamafactory", "sharegpt-axolotl"):
        out = tmp_path / fmt
        said = cli("export", run, "--out", out, "--format", fmt)
        assert "cut answer 1" in said and "1 rows cut at --max-output-tokens left out" in said
        summary = json.loads((out / ".regen-export").read_text())
        assert summary["dropped"] == {"cut_answer": 1}
        written = [p for p in out.glob("data/*/train-*.jsonl")]
        assert written and not any(r["id"] == "cut" for p in written for r in rows_of(p))
    tok = checkfix.load("qwen")
    strategy = trainer_readers.axolotl_strategy(monkeypatch, tok)
    [record] = [r for r in rows_of(run / "completions" / "00000.jsonl") if r["id"] == "cut"]
    row = make_format("sharegpt-axolotl").row(Completion.of(record), None)
    tokens = strategy.tokenize_prompt(json.loads(json.dumps(row)))
    ids, labels = tokens["input_ids"], tokens["labels"]
    end = max(i for i, label in enumerate(labels) if label != -100)
    assert ids[end] == tok.convert_tokens_to_ids(END)  # trained: what regen keeps out
    assert tok.decode(ids[:end]).endswith("Paris is")
