"""`regen export`: formats, filters, split, merge, overwrite; every output loads with
datasets.load_dataset."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets  # offline, with a throwaway cache: see conftest
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from export_helpers import WEATHER_TOOL, cli, data_file, records, rows_of
from export_helpers import run as run  # the fixture
from regen.cli import main
from regen.export import ExportRequest, Filters, export_run, make_format
from regen.export.files import MARKER
from regen.finished.encode import Encoder


def test_sharegpt_round_trips_through_load_dataset(run, tmp_path):
    out = tmp_path / "sg"
    cli("export", run, "--out", out, "--format", "specforge", "--eval-fraction", "0.2")
    ds = datasets.load_dataset(str(out))
    assert set(ds) == {"train", "validation"}
    # 33 rows less the one cut at the cap: SpecForge would supervise an end-of-turn after it
    assert ds["train"].num_rows + ds["validation"].num_rows == 32
    row = next(r for r in ds["train"].to_list() + ds["validation"].to_list() if r["id"] == "g1")
    assert row["sample"] == 0
    assert [m["role"] for m in row["conversations"]] == ["user", "assistant"]
    assert row["conversations"][1]["content"].startswith("<think>\nThinking about 1.\n</think>")


def test_reasoning_can_go_to_a_field(run, tmp_path):
    out = tmp_path / "sg"
    cli("export", run, "--out", out, "--reasoning", "field", "--drop-truncated")
    rows = [json.loads(line) for line in data_file(out).read_text().splitlines()]
    assert "cut" not in {r["id"] for r in rows}
    g1 = next(r for r in rows if r["id"] == "g1")["conversations"][1]
    assert g1 == {
        "role": "assistant",
        "content": "Answer 1: Paris is the capital of France.",
        "reasoning_content": "Thinking about 1.",
    }
    tool = next(r for r in rows if r["id"] == "tool")
    assert tool["tools"] == [WEATHER_TOOL] and tool["conversations"][1]["tool_calls"]


def test_tokenized_parquet_matches_check_masks(run, tmp_path):
    tok = str(checkfix.qwen_style_dir())
    per_sample = tmp_path / "samples.jsonl"
    CliRunner().invoke(
        main, ["check", str(run), "--tokenizer", tok, "--per-sample", str(per_sample)]
    )
    checked = {s["id"]: s["mask_sum"] for s in map(json.loads, per_sample.read_text().splitlines())}
    out = tmp_path / "tok"
    cli("export", run, "--out", out, "--format", "tokenized", "--tokenizer", tok)
    ds = datasets.load_dataset(str(out))["train"]
    assert ds.num_rows == 33 and set(ds.column_names) >= {
        "input_ids",
        "loss_mask",
        "attention_mask",
    }
    for row in ds:
        assert sum(row["loss_mask"]) == checked[row["id"]] > 0
        assert len(row["input_ids"]) == len(row["loss_mask"]) == sum(row["attention_mask"])


def test_tokenized_jsonl_and_filters(run, tmp_path):
    tok = str(checkfix.qwen_style_dir())
    out = tmp_path / "tokj"
    report = tmp_path / "export.json"
    cli(
        "export",
        run,
        "--out",
        out,
        "--format",
        "tokenized",
        "--file-type",
        "jsonl",
        "--tokenizer",
        tok,
        "--drop-degenerate",
        "--drop-truncated",
        "--min-supervised-tokens",
        "12",
        "--report",
        report,
    )
    summary = json.loads(report.read_text())
    assert summary["dropped"] == {"degenerate": 1, "truncated": 1}
    ds = datasets.load_dataset(str(out))["train"]
    assert ds.num_rows == 31 and min(sum(m) for m in ds["loss_mask"]) >= 12


def test_the_cards_check_judges_the_rows_the_export_holds(run, tmp_path):
    """check judges a run before export's filters: the export's own verdict (card, push) is
    over what it wrote, so the rows --drop-degenerate and --drop-truncated left out do not
    fail it, and the rows it kept are counted."""
    tok = str(checkfix.qwen_style_dir())
    kept, unfiltered = tmp_path / "export.json", tmp_path / "all.json"
    cli(
        "export",
        run,
        "--out",
        tmp_path / "kept",
        "--format",
        "tokenized",
        "--tokenizer",
        tok,
        "--drop-degenerate",
        "--drop-truncated",
        "--report",
        kept,
    )
    cli(
        "export",
        run,
        "--out",
        tmp_path / "all",
        "--format",
        "tokenized",
        "--tokenizer",
        tok,
        "--report",
        unfiltered,
    )
    filtered = json.loads(kept.read_text())["check"]
    whole = json.loads(unfiltered.read_text())["check"]
    assert whole["verdict"] == "fail" and "empty_answer" in whole["failed_rules"]
    assert filtered["verdict"] == "pass", filtered["failed_rules"]
    assert filtered["overall"]["samples"] == whole["overall"]["samples"] - 2 == 31


def test_mask_filters_need_a_tokenizer(run, tmp_path):
    result = CliRunner().invoke(
        main, ["export", str(run), "--out", str(tmp_path / "o"), "--drop-degenerate"]
    )
    assert result.exit_code == 2 and "--tokenizer" in result.output


def test_eval_split_is_stable(run, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    cli("export", run, "--out", a, "--eval-fraction", "0.3")
    cli("export", run, "--out", b, "--eval-fraction", "0.3")
    validation = data_file(a, split="validation")
    assert validation.read_bytes() == data_file(b, split="validation").read_bytes()


def test_merge_into_dedups_by_id_and_content(run, tmp_path):
    out = tmp_path / "merged"
    cli("export", run, "--out", out)
    new = records()[:5]
    new[0]["messages"][-1]["content"] = "A better answer."  # same id, new content: replaced
    dup = json.loads(json.dumps(new[1]))
    dup["id"] = "copy-of-g1"  # new id, same conversation: skipped
    fresh = checkfix.completion("fresh", "Brand new answer.")
    run2 = checkfix.write_run(tmp_path / "run2", [*new, dup, fresh])
    report = tmp_path / "merge.json"
    cli("export", run2, "--out", out, "--merge-into", out, "--report", report)
    summary = json.loads(report.read_text())
    assert summary["outcomes"] == {
        "replaced": 1,
        "skipped_same": 4,
        "skipped_duplicate_content": 1,
        "added": 1,
    }
    ds = datasets.load_dataset(str(out))["train"]
    assert ds.num_rows == 33 and len(set(ds["id"])) == 33  # the cut row is never in it
    g0 = next(r for r in ds if r["id"] == "g0")
    assert g0["conversations"][-1]["content"].endswith("A better answer.")
    assert not [p for p in out.iterdir() if p.name.startswith(".") and p.name != MARKER]


def test_a_failed_export_leaves_no_finished_looking_file(run, tmp_path):
    class Boom(Exception):
        pass

    fmt = make_format("sharegpt", "inline")
    calls = {"n": 0}
    original = fmt.row

    def row(completion, enc):
        calls["n"] += 1
        if calls["n"] == 20:
            raise Boom
        return original(completion, enc)

    fmt.row = row  # type: ignore[method-assign]
    out = tmp_path / "x"
    with pytest.raises(Boom):
        export_run(ExportRequest([run], out, fmt, encoder=None, filters=Filters()))
    assert list(out.iterdir()) == []


def test_library_call_with_encoder(run, tmp_path):
    encoder = Encoder.of(checkfix.load("smol"))
    request = ExportRequest(
        [run],
        tmp_path / "s",
        make_format("tokenized", "inline"),
        encoder=encoder,
        filters=Filters(),
        file_type="parquet",
    )
    summary = export_run(request)
    assert summary.written == {"train": 33} and summary.outcomes == {"added": 33}


def test_sharegpt_is_from_value_as_axolotl_and_llama_factory_read_it(run, tmp_path):
    out = tmp_path / "sg"
    cli("export", run, "--out", out, "--format", "sharegpt")
    rows = {r["id"]: r for r in rows_of(data_file(out))}
    g1 = rows["g1"]["conversations"]
    assert [t["from"] for t in g1] == ["human", "gpt"] and set(g1[0]) == {"from", "value"}
    assert g1[1]["value"].startswith("<think>\nThinking about 1.\n</think>\n\nAnswer 1")
    tool = rows["tool"]
    assert [t["from"] for t in tool["conversations"]] == [
        "human",
        "function_call",
        "observation",
        "gpt",
    ]
    assert json.loads(tool["conversations"][1]["value"]) == {"name": "get_weather", "arguments": {}}
    assert json.loads(tool["tools"]) == [WEATHER_TOOL]  # LLaMA-Factory's tools: a JSON string


def test_a_second_export_to_the_same_directory_is_refused(run, tmp_path):
    out = tmp_path / "x"
    first = cli("export", run, "--out", out)
    assert f"wrote {out.resolve()} (specforge): train 32" in first
    assert "{" not in first and "train with: SpecForge" in first
    before = data_file(out).read_bytes()
    again = CliRunner().invoke(
        main, ["export", str(run), "--out", str(out), "--format", "sharegpt-axolotl"]
    )
    assert again.exit_code == 2 and "already holds an export" in again.output
    assert "--overwrite" in again.output and data_file(out).read_bytes() == before
    cli("export", run, "--out", out, "--format", "sharegpt-axolotl", "--overwrite")
    assert not data_file(out).exists() and data_file(out, "qa").read_bytes() != before


def test_an_unrelated_non_empty_directory_is_refused(run, tmp_path):
    other = tmp_path / "home"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["export", str(run), "--out", str(other)])
    assert result.exit_code == 2 and "not an export (notes.txt)" in result.output
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_targets_warn_when_they_would_drop_reasoning(run, tmp_path):
    field = cli("export", run, "--out", tmp_path / "f", "--reasoning", "field")
    assert "warning: 30 samples carry reasoning in reasoning_content" in field
    dropped = cli(
        "export", run, "--out", tmp_path / "d", "--format", "sharegpt", "--reasoning", "drop"
    )
    assert "--reasoning drop left it out" in dropped
    assert "rows have no system message" in field
