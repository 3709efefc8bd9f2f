"""`regen export`: formats, filters, split, merge, overwrite; every output loads with
datasets.load_dataset, and each trainer target with that trainer's own loader."""

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
from regen.export import ExportRequest, Filters, export_run, make_format
from regen.export.files import MARKER
from regen.finished.encode import Encoder

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}


def records() -> list[dict]:
    good = [
        checkfix.completion(
            f"g{i}",
            f"Answer {i}: Paris is the capital of France.",
            reasoning=f"Thinking about {i}.",
            thinking="on",
        )
        for i in range(30)
    ]
    tool = checkfix.completion(
        "tool",
        "It is sunny.",
        tools=[WEATHER_TOOL],
        history=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "1", "content": "sunny"},
        ],
    )
    bad = checkfix.completion("empty", "", reasoning="", thinking="on")
    cut = checkfix.completion("cut", "Paris is", reasoning="long", finish="length")
    return [*good, tool, bad, cut]


@pytest.fixture
def run(tmp_path) -> Path:
    return checkfix.write_run(tmp_path / "run", records())


def data_file(out: Path, config: str = "default", split: str = "train") -> Path:
    """The one JSONL file of a split (a split under --max-file-mb is one file)."""
    return out / "data" / config / f"{split}-00000-of-00001.jsonl"


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def test_sharegpt_round_trips_through_load_dataset(run, tmp_path):
    out = tmp_path / "sg"
    cli("export", run, "--out", out, "--format", "specforge", "--eval-fraction", "0.2")
    ds = datasets.load_dataset(str(out))
    assert set(ds) == {"train", "validation"}
    assert ds["train"].num_rows + ds["validation"].num_rows == 33
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
    assert ds.num_rows == 34 and len(set(ds["id"])) == 34
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


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


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
    assert f"wrote {out.resolve()} (specforge): train 33" in first
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
    assert "warning: 31 samples carry reasoning in reasoning_content" in field
    dropped = cli(
        "export", run, "--out", tmp_path / "d", "--format", "sharegpt", "--reasoning", "drop"
    )
    assert "--reasoning drop left it out" in dropped
    assert "rows have no system message" in field


# --- the trainers' own loaders ----------------------------------------------------------------


def regen_rows(run: Path, tmp_path: Path, fmt: str = "specforge-tokenized") -> dict[str, dict]:
    out = tmp_path / fmt
    cli("export", run, "--out", out, "--format", fmt, "--tokenizer", checkfix.qwen_style_dir())
    return {r["id"]: r for r in rows_of(data_file(out, "default" if "specforge" in fmt else "qa"))}


def test_specforge_tokenized_reads_with_specforge_prompt_builder(run, tmp_path):
    from specforge.data.prompt_builder import prepare_prompt_tasks

    ours = regen_rows(run, tmp_path)
    tasks = prepare_prompt_tasks(
        data_file(tmp_path / "specforge-tokenized"),
        None,
        chat_template=None,
        max_length=4096,
        is_preformatted=False,
        train_only_last_turn=False,
        cache_dir=None,
        cache_key=None,
        num_proc=1,
    )
    assert len(tasks) == len(ours) == 33
    got = sorted((t["payload"]["input_ids"], t["payload"]["loss_mask"]) for t in tasks)
    assert got == sorted((r["input_ids"], r["loss_mask"]) for r in ours.values())


def test_speculators_reads_the_rows_without_rendering(run, tmp_path):
    from speculators.data_generation.preprocessing import (
        build_speculator_training_dataset,
        load_raw_dataset,
    )

    ours = regen_rows(run, tmp_path, "speculators")
    raw, _ = load_raw_dataset(str(tmp_path / "speculators" / "data" / "*" / "train-*.jsonl"))
    ds = build_speculator_training_dataset(raw, checkfix.load("qwen"), max_length=4096, num_proc=1)
    assert len(ds) == 33
    got = sorted((r["input_ids"].tolist(), r["loss_mask"].tolist()) for r in ds)
    assert got == sorted((r["input_ids"], r["loss_mask"]) for r in ours.values())


def test_jsonl_is_cut_by_size_and_each_trainer_reads_every_file(run, tmp_path):
    """--max-file-mb: SpecForge reads each file of the split (one per run: it says so),
    speculators reads them all through its glob, `datasets` through the card."""
    from specforge.data.prompt_builder import prepare_prompt_tasks
    from speculators.data_generation.preprocessing import load_raw_dataset

    ours = regen_rows(run, tmp_path)
    out = tmp_path / "cut"
    said = cli(
        "export",
        run,
        "--out",
        out,
        "--format",
        "specforge-tokenized",
        "--tokenizer",
        checkfix.qwen_style_dir(),
        "--max-file-mb",
        "0.004",
    )
    files = sorted((out / "data" / "default").glob("train-*.jsonl"))
    n = len(files)
    assert n > 2 and all(f.name.endswith(f"-of-{n:05d}.jsonl") for f in files)
    assert all(f.stat().st_size < 0.004 * 2**20 + 2000 for f in files)  # cut after the row
    assert f"data.prompts_path={out.resolve()}/data/default/train-00000-of-{n:05d}.jsonl" in said
    assert f"SpecForge opens one file per run: the train split is {n} files" in said
    got = []
    for f in files:
        got += prepare_prompt_tasks(
            f,
            None,
            chat_template=None,
            max_length=4096,
            is_preformatted=False,
            train_only_last_turn=False,
            cache_dir=None,
            cache_key=None,
            num_proc=1,
        )
    assert sorted((t["payload"]["input_ids"], t["payload"]["loss_mask"]) for t in got) == sorted(
        (r["input_ids"], r["loss_mask"]) for r in ours.values()
    )
    assert len(datasets.load_dataset(str(out), split="train")) == 33
    speculators = tmp_path / "spec"
    cli(
        "export",
        run,
        "--out",
        speculators,
        "--format",
        "speculators",
        "--tokenizer",
        checkfix.qwen_style_dir(),
        "--max-file-mb",
        "0.004",
    )
    domains = len(list(speculators.glob("data/*")))
    assert len(list(speculators.glob("data/*/train-*.jsonl"))) > domains
    raw, _ = load_raw_dataset(str(speculators / "data" / "*" / "train-*.jsonl"))
    assert len(raw) == 33


def specforge_encode(rows_path: Path, template_name: str) -> list[tuple[list[int], list[int]]]:
    from specforge.data.preprocessing import build_eagle3_dataset

    ds = datasets.load_dataset("json", data_files=str(rows_path), split="train")
    out = build_eagle3_dataset(
        ds,
        checkfix.load("qwen"),
        chat_template=template_name,
        max_length=4096,
        num_proc=None,
        shuffle_seed=None,
    )
    return [(r["input_ids"][0], r["loss_mask"][0]) for r in out.with_format(None)]


def test_specforge_conversations_give_regens_ids_with_a_template_without_system_prompt(
    tmp_path,
):
    from specforge.data.template import TEMPLATE_REGISTRY, ChatTemplate

    TEMPLATE_REGISTRY.register(
        "regen-chatml",
        ChatTemplate(
            assistant_header="<|im_start|>assistant\n",
            user_header="<|im_start|>user\n",
            system_prompt=None,
            end_of_turn_token="<|im_end|>",
        ),
        override=True,
    )
    plain = [checkfix.completion(f"p{i}", f"Paris is answer {i}.") for i in range(20)]
    run = checkfix.write_run(tmp_path / "run", plain)
    cli("export", run, "--out", tmp_path / "conv", "--format", "specforge")
    ours = sorted((r["input_ids"], r["loss_mask"]) for r in regen_rows(run, tmp_path).values())
    theirs = specforge_encode(data_file(tmp_path / "conv"), "regen-chatml")
    assert sorted(theirs) == ours  # 20/20: the same ids and the same masks
    # SpecForge's built-in `qwen` template adds a system prompt: the context changes.
    with_default = specforge_encode(data_file(tmp_path / "conv"), "qwen")
    assert all(len(ids) > len(o[0]) for (ids, _), o in zip(sorted(with_default), ours, strict=True))


def test_tokenized_targets_warn_when_the_template_drops_reasoning(run, tmp_path):
    out = cli(
        "export",
        run,
        "--out",
        tmp_path / "t",
        "--format",
        "tokenized",
        "--tokenizer",
        checkfix.smollm2_gguf(),
    )
    assert "warning: 31 rows lose their reasoning: the chat template does not render it" in out
    quiet = cli(
        "export",
        run,
        "--out",
        tmp_path / "q",
        "--format",
        "specforge-tokenized",
        "--tokenizer",
        checkfix.qwen_style_dir(),
    )
    assert "warning" not in quiet


def test_llamafactory_keeps_text_with_calls_and_parallel_results(tmp_path, monkeypatch):
    import trainer_readers

    call = {
        "id": "1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    history = [
        {"role": "user", "content": "weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "Let me look both up.",
            "tool_calls": [call, {**call, "id": "2"}],
        },
        {"role": "tool", "tool_call_id": "1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "2", "content": "rain"},
    ]
    run = checkfix.write_run(
        tmp_path / "run",
        [
            checkfix.completion(
                "par", "Sunny in Paris, rain in Rome.", history=history, tools=[WEATHER_TOOL]
            )
        ],
    )
    out = tmp_path / "lf"
    text = cli("export", run, "--out", out, "--format", "sharegpt-llamafactory")
    assert "would skip" not in text
    [row] = rows_of(data_file(out))
    assert [t["from"] for t in row["conversations"]] == [
        "human",
        "function_call",
        "observation",
        "gpt",
    ]
    value = row["conversations"][1]["value"]
    assert value.startswith("Let me look both up.<tool_call>[") and value.endswith("</tool_call>")
    assert json.loads(row["conversations"][2]["value"]) == ["sunny", "rain"]
    converter = trainer_readers.llamafactory_converter(monkeypatch)
    assert trainer_readers.llamafactory_keeps(converter, row)


def test_openai_batch_output_is_joined_on_custom_id_with_the_errors(tmp_path):
    rows = [checkfix.completion("req-1", "Paris."), checkfix.completion("req-2", "Rome.")]
    rows[1]["sample"] = 1  # --samples-per-prompt 2: the second sample of req-2
    run = checkfix.write_run(tmp_path / "run", rows)
    errors = run / "errors"
    errors.mkdir()
    failed = [
        {
            "id": "req-3",
            "sample": 0,
            "line": 3,
            "attempts": 4,
            "error": {"type": "server_error", "message": "503 from the server"},
        },
        {
            "id": "req-1",
            "sample": 0,
            "line": 1,
            "attempts": 1,
            "error": {"type": "timeout", "message": "retried, then answered"},
        },
    ]
    (errors / "00000.jsonl").write_text("".join(json.dumps(e) + "\n" for e in failed))
    out = tmp_path / "batch"
    cli("export", run, "--out", out, "--format", "openai-batch", "--val-fraction", "0.5")
    lines = {r["custom_id"]: r for r in rows_of(data_file(out))}
    assert set(lines) == {"req-1", "req-2#1", "req-3"}  # req-1's error was answered later
    ok = lines["req-1"]["response"]
    assert ok["status_code"] == 200 and lines["req-1"]["error"] is None
    body = ok["body"]
    assert body["object"] == "chat.completion" and body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Paris."}
    assert (lines["req-2#1"]["prompt_id"], lines["req-2#1"]["sample"]) == ("req-2", 1)
    assert lines["req-3"] == {
        "id": lines["req-3"]["id"],
        "custom_id": "req-3",
        "prompt_id": "req-3",
        "sample": 0,
        "response": None,
        "error": {"code": "server_error", "message": "503 from the server"},
    }


def test_specforge_names_the_rows_it_would_tokenise_differently(run, tmp_path):
    """Reasoning inline in content (what SpecForge keeps) renders differently from the
    template's own reasoning_content slot: export names exactly those rows, and SpecForge's
    own code agrees, row by row."""
    from specforge.data.template import TEMPLATE_REGISTRY, ChatTemplate

    TEMPLATE_REGISTRY.register(
        "regen-chatml",
        ChatTemplate(
            assistant_header="<|im_start|>assistant\n",
            user_header="<|im_start|>user\n",
            system_prompt=None,
            end_of_turn_token="<|im_end|>",
        ),
        override=True,
    )
    out, report = tmp_path / "conv", tmp_path / "summary.json"
    text = cli(
        "export",
        run,
        "--out",
        out,
        "--format",
        "specforge",
        "--tokenizer",
        checkfix.qwen_style_dir(),
        "--report",
        report,
    )
    differs = json.loads(report.read_text())["render_differs"].values()
    named = {(r["id"], r["sample"]) for rows in differs for r in rows}
    assert "rows that SpecForge tokenises differently" in text and "reasoning:" in text
    ours = regen_rows(run, tmp_path)
    conv = rows_of(data_file(out))
    theirs = specforge_encode(data_file(out), "regen-chatml")
    assert len(theirs) == len(conv) == 33
    same = {tuple(ids) for ids, _ in theirs}  # SpecForge reorders its rows: match by tokens
    differ = {
        (row["id"], row["sample"])
        for row in conv
        if tuple(ours[row["id"]]["input_ids"]) not in same
    }
    assert differ == named and len(named) == 31  # the 31 rows with reasoning


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
    assert len({r["id"] for r in rows}) == 34
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
