"""The README walkthrough, end to end, with real parts only: prepare the example recipe,
generate with the embedded llama.cpp server, check with the model's own tokenizer and
template, export pre-tokenised data and load it with `datasets`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import datasets
import orjson
import pytest

ROOT = Path(__file__).parent.parent
pytestmark = pytest.mark.model


def regen(*args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "regen", *args], capture_output=True, text=True, timeout=600
    )
    assert done.returncode in ok, done.stdout + done.stderr
    return done


def test_prepare_generate_check_export(tmp_path):
    prompts = tmp_path / "work" / "prompts.jsonl"
    regen("prepare", str(ROOT / "examples" / "recipe.yaml"), "--output", str(prompts))
    assert prompts.read_bytes().count(b"\n") == 20

    run = tmp_path / "run"
    regen(
        "generate", "--prompts", str(prompts), "--output-dir", str(run),
        "--max-output-tokens", "16", "--temperature", "0", "--display", "plain",
    )  # fmt: skip
    status = orjson.loads(regen("status", str(run), "--json").stdout)
    assert status["files"] == {"completions": 20, "errors": 0}

    report = tmp_path / "report.json"
    checked = regen(
        "check", str(run), "--tokenizer", "embedded", "--json", str(report),
        "--max", "truncated=off", ok=(0, 1),
    )  # fmt: skip
    data = orjson.loads(report.read_bytes())
    assert data["overall"]["samples"] == 20
    assert "verdict" in checked.stdout
    # Composition by the sources and categories that prepare wrote and generate carried.
    assert len(data["sources"]) == 7

    out = tmp_path / "tok"
    regen("export", str(run), "--out", str(out), "--format", "tokenized", "--tokenizer", "embedded")
    train = datasets.load_dataset(str(out))["train"]
    assert len(train) == 20
    for row in train:
        assert sum(row["loss_mask"]) > 0 and len(row["input_ids"]) == len(row["loss_mask"])
