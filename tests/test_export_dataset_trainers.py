"""The walkthrough run's export read by the trainers' own code: the draft vocabulary as
speculators and SpecForge load it, and the ShareGPT rows as LLaMA-Factory and axolotl read
them."""

from __future__ import annotations

import logging
import sys
import types
from pathlib import Path

import datasets  # offline, with a throwaway cache: see conftest
import numpy as np
import orjson
import pytest

import trainer_readers
from export_helpers import export
from gen_helpers import read_lines

pytestmark = pytest.mark.model


# --- the draft vocabulary -------------------------------------------------------------------


def masked_counts(rows: list[dict]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for row in rows:
        for token, mask in zip(row["input_ids"], row["loss_mask"], strict=True):
            if mask:
                counts[token] = counts.get(token, 0) + 1
    return counts


@pytest.fixture
def no_loguru(monkeypatch):
    """speculators' training CLI logs with loguru, which its --no-deps install lacks: a
    stand-in logger is enough to import its mapping loader."""
    stub = types.ModuleType("loguru")
    stub.logger = logging.getLogger("loguru")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "loguru", stub)


@pytest.mark.parametrize("size", [64, 5000])  # 5000: more than the distinct tokens: padded
def test_draft_vocab_loads_with_the_trainers_own_code(walkthrough, tmp_path, size, no_loguru):
    import torch
    from specforge.core.compact_teacher import validate_vocab_mapping_consistency
    from speculators.train.cli import _load_mappings
    from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution

    out = tmp_path / "vocab"
    done = export(
        walkthrough,
        out,
        "--format",
        "speculators",
        "--tokenizer",
        "embedded",
        "--draft-vocab-size",
        size,
    )
    folder = out / "draft_vocab"
    d2t, t2d, n = _load_mappings(folder / f"d2t-{size}.npy", folder / f"t2d-{size}.npy", size)
    rows = datasets.load_dataset(str(out))["train"].to_list()
    theirs_d2t, theirs_t2d = build_vocab_mappings_from_distribution(
        masked_counts(rows), size, t2d.shape[0]
    )
    assert n == size and torch.equal(d2t, theirs_d2t) and torch.equal(t2d, theirs_t2d)
    mapping = torch.load(folder / f"vocab_mapping-{size}.pt")  # SpecForge's file
    validate_vocab_mapping_consistency(mapping["t2d"], mapping["d2t"])
    assert torch.equal(mapping["d2t"], d2t) and t2d.shape[0] == 49152  # SmolLM2's vocabulary
    facts = orjson.loads((out / "regen.json").read_bytes())["draft_vocab"]
    counts = masked_counts(rows)
    covered = sorted(counts.values(), reverse=True)[:size]
    assert facts["coverage"] == round(sum(covered) / sum(counts.values()), 4)
    assert facts["distinct"] == len(counts) and str(size) in facts["curve"]
    assert ("padded with" in done.stdout) == (size > len(counts))
    card = (out / "README.md").read_text()
    assert "## Draft vocabulary" in card and f"| {size} | " in card
    assert np.load(folder / f"t2d-{size}.npy").sum() == size


# --- the ShareGPT readers of LLaMA-Factory and axolotl -------------------------------------


def export_rows(run: Path, out: Path, fmt: str) -> tuple[list[dict], dict]:
    """The rows a conversation target holds: every answer but those cut at the cap, whose
    end-of-turn the trainer would supervise (said in the summary, counted as cut_answer)."""
    done = export(run, out, "--format", fmt)
    rows = datasets.load_dataset(str(out))["train"].to_list()
    summary = orjson.loads((out / ".regen-export").read_bytes())
    cut = sum(r["finish_reason"] == "length" for r in read_lines(run, "completions"))
    assert cut and summary["dropped"] == {"cut_answer": cut} and len(rows) == 20 - cut
    assert f"warning: {cut} rows cut at --max-output-tokens left out" in done.stdout
    return rows, summary


def test_llamafactory_keeps_every_row_the_export_does_not_name(walkthrough, tmp_path, monkeypatch):
    converter = trainer_readers.llamafactory_converter(monkeypatch)
    rows, summary = export_rows(walkthrough, tmp_path / "lf", "sharegpt-llamafactory")
    lost = {
        (r["id"], r["sample"]) for r in rows if not trainer_readers.llamafactory_keeps(converter, r)
    }
    named = {(i["id"], i["sample"]) for ids in summary["trainer_skips"].values() for i in ids}
    assert lost == named
    # What LLaMA-Factory cannot hold (a user turn right after a tool result) is named; see
    # test_export_formats for a turn with text and calls, and several tool results in a row.
    assert list(summary["trainer_skips"]) == [
        "a human turn after observation (the turns must alternate)"
    ]


def test_axolotl_reads_every_row_with_known_roles(walkthrough, tmp_path, monkeypatch):
    from regen.tokenizer import load_tokenizer

    tok = load_tokenizer("embedded")
    strategy = trainer_readers.axolotl_strategy(monkeypatch, tok)
    rows, summary = export_rows(walkthrough, tmp_path / "ax", "sharegpt-axolotl")
    assert summary["trainer_skips"] == {}
    for row in rows:
        turns = strategy.get_conversation_thread(row)
        assert {t["role"] for t in turns} <= {"system", "user", "assistant", "tool"}
        trained = [t["training"] for t in turns if t["role"] == "assistant"]
        assert trained[-1] is True and not any(trained[:-1])  # only the regenerated turn
        tokens = strategy.tokenize_prompt(row)
        final = row["conversations"][-1]
        if final["value"] or final["tool_calls"]:  # an empty answer has nothing to learn
            assert any(label != -100 for label in tokens["labels"]), row["id"]
