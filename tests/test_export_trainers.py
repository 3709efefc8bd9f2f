"""`regen export` for the trainers: each trainer target read with that trainer's own
loader (SpecForge, speculators, LLaMA-Factory), and what regen warns they would drop."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets  # offline, with a throwaway cache: see conftest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from export_helpers import WEATHER_TOOL, cli, data_file, rows_of
from export_helpers import run as run  # the fixture


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
    assert len(theirs) == len(conv) == 32  # not the row cut at the cap
    same = {tuple(ids) for ids, _ in theirs}  # SpecForge reorders its rows: match by tokens
    differ = {
        (row["id"], row["sample"])
        for row in conv
        if tuple(ours[row["id"]]["input_ids"]) not in same
    }
    assert differ == named and len(named) == 30  # the 30 rows with reasoning
