"""Regenerated agent traces read by the trainers' own loaders: a `--regenerate-turns all` run
on a tool-calling fake target (every assistant turn the target's, the cached tool results
under the target's call ids), exported for SpecForge and speculators; each loader's ids and
masks are regen's, and only the target's turns are supervised, never a tool result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import read_lines, run

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.cli import main
from regen.testing.fake_tools import tool_caller

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
CITIES = ("Paris", "Lyon", "Rome", "Oslo")


def trace(city: str) -> dict:
    """The dataset's trace: the same call the target makes, and its result."""
    call = {
        "id": "orig",
        "type": "function",
        "function": {"name": "get_weather", "arguments": orjson.dumps({"city": city}).decode()},
    }
    return {
        "id": city,
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": f"weather in {city}"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "orig", "content": f"RESULT-{city}-sunny"},
        ],
    }


@pytest.fixture
def traces_run(tmp_path, fake_server) -> Path:
    server = fake_server(answer=tool_caller(), reasoning="split")
    prompts = tmp_path / "p.jsonl"
    prompts.write_bytes(b"".join(orjson.dumps(trace(c)) + b"\n" for c in CITIES))
    result = run(prompts, tmp_path / "run", [server.url], regenerate_turns="all")
    assert result.exit_code == 0, result.message
    records = read_lines(tmp_path / "run", "completions")
    assert all(r["meta"]["turns"][0]["tool_calls_match"] for r in records)
    return tmp_path / "run"


def export(run_dir: Path, out: Path, fmt: str) -> dict[str, dict]:
    tokenizer = str(checkfix.qwen_style_dir())
    result = CliRunner().invoke(
        main, ["export", str(run_dir), "--out", str(out), "--format", fmt, "--tokenizer", tokenizer]
    )
    assert result.exit_code == 0, result.output
    files = sorted(out.glob("data/*/train-*.jsonl"))
    rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    return {r["id"]: r for r in rows}


def assert_only_the_targets_turns_are_trained(rows: dict[str, dict]) -> None:
    tok = checkfix.load("qwen")
    assert len(rows) == len(CITIES)
    for row in rows.values():
        trained = tok.decode(
            [t for t, m in zip(row["input_ids"], row["loss_mask"], strict=True) if m]
        )
        whole = tok.decode(row["input_ids"])
        city = next(c for c in CITIES if f"RESULT-{c}" in whole)
        assert "get_weather" in trained  # the target's call: a turn it wrote
        assert "answer from tool" in trained  # its answer to the result
        assert f"RESULT-{city}" not in trained.replace(f"answer from tool: RESULT-{city}", "")


def test_specforge_reads_regenerated_tool_traces(traces_run, tmp_path):
    from specforge.data.prompt_builder import prepare_prompt_tasks

    ours = export(traces_run, tmp_path / "sf", "specforge-tokenized")
    path = next((tmp_path / "sf").glob("data/*/train-*.jsonl"))
    tasks = prepare_prompt_tasks(
        path,
        None,
        chat_template=None,
        max_length=4096,
        is_preformatted=False,
        train_only_last_turn=False,
        cache_dir=None,
        cache_key=None,
        num_proc=1,
    )
    got = sorted((t["payload"]["input_ids"], t["payload"]["loss_mask"]) for t in tasks)
    assert got == sorted((r["input_ids"], r["loss_mask"]) for r in ours.values())
    assert_only_the_targets_turns_are_trained(ours)


def test_speculators_reads_regenerated_tool_traces(traces_run, tmp_path):
    from speculators.data_generation.preprocessing import (
        build_speculator_training_dataset,
        load_raw_dataset,
    )

    ours = export(traces_run, tmp_path / "sp", "speculators")
    raw, _ = load_raw_dataset(str(tmp_path / "sp" / "data" / "*" / "train-*.jsonl"))
    ds = build_speculator_training_dataset(raw, checkfix.load("qwen"), max_length=4096, num_proc=1)
    got = sorted((r["input_ids"].tolist(), r["loss_mask"].tolist()) for r in ds)
    assert got == sorted((r["input_ids"], r["loss_mask"]) for r in ours.values())
    assert_only_the_targets_turns_are_trained(ours)
