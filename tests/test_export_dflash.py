"""DFlash: SpecForge's own DFlash data path (its config schema, its algorithm registry's
DFlash providers, its prompt preparation) reads regen's export with regen's ids and masks, as
docs/training.md tells a user to train."""

from __future__ import annotations

import json
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.cli import main

# SpecForge's configs/qwen3-8b-dflash.json, the DFlash fields (the rest shape the model)
DRAFT = {
    "architectures": ["DFlashDraftModel"],
    "block_size": 16,
    "num_hidden_layers": 5,
    "num_target_layers": 36,
    "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]},
}


def dflash_config(tmp_path: Path, data: dict) -> object:
    """SpecForge's examples/configs/qwen3-8b-dflash-online.yaml, paths moved under tmp_path."""
    from specforge.config.schema import Config

    (tmp_path / "draft.json").write_text(json.dumps(DRAFT))
    server = {
        "control_dir": str(tmp_path / "control"),
        "backend": "mooncake",
        "consumer_state_dir": str(tmp_path / "consumer"),
        "server_urls": ["http://127.0.0.1:30000"],
        "mooncake_metadata_server": "http://127.0.0.1:35880/metadata",
        "mooncake_master_server_addr": "127.0.0.1:35551",
        "mooncake_protocol": "tcp",
    }
    draft = str(tmp_path / "draft.json")
    return Config(
        model={"target_model_path": "Qwen/Qwen3-8B", "draft_model_config": draft},
        data={
            "max_length": 3072,
            "build_dataset_num_proc": 1,
            "cache_dir": str(tmp_path / "cache"),
            **data,
        },
        training={
            "strategy": "dflash",
            "num_epochs": 6,
            "batch_size": 4,
            "learning_rate": 6e-4,
            "num_anchors": 512,
            "loss_decay_gamma": 7.0,
        },
        deployment={
            "mode": "disaggregated",
            "trainer": {"nnodes": 1, "nproc_per_node": 8},
            "disaggregated": server,
        },
    )


def specforge_dflash_prompts(cfg: object) -> list[tuple[list[int], list[int]]]:
    """What SpecForge's DFlash trainer takes from the data: `_prepare_prompts` with the
    registered DFlash algorithm (its minimum loss tokens and its loss-mask filter)."""
    from specforge.algorithms.builtin import builtin_algorithm_registry
    from specforge.training.assembly import _prepare_prompts

    dflash = builtin_algorithm_registry().resolve("dflash")
    tasks = _prepare_prompts(cfg, checkfix.load("qwen"), algorithm=dflash, draft_config=DRAFT)
    return sorted((t["payload"]["input_ids"], t["payload"]["loss_mask"]) for t in tasks)


def records() -> list[dict]:
    plain = [
        checkfix.completion(
            f"p{i}",
            f"Paris is answer {i}.",
            reasoning=f"Think {i}.",
            thinking="on",
            category=("qa", "code")[i % 2],
        )
        for i in range(12)
    ]
    return plain


def export(run: Path, out: Path, fmt: str, *extra: str) -> str:
    args = ["export", run, "--out", out, "--format", fmt, "--tokenizer", checkfix.qwen_style_dir()]
    result = CliRunner().invoke(main, [str(a) for a in (*args, *extra)])
    assert result.exit_code == 0, result.output
    return result.output


def train_rows(out: Path) -> list[dict]:
    path = out / "data" / "default" / "train-00000-of-00001.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_specforge_dflash_reads_the_tokenized_export_exactly(tmp_path):
    run = checkfix.write_run(tmp_path / "run", records())
    export(run, tmp_path / "tok", "specforge-tokenized", "--holdout", "0.25")
    ours = sorted((r["input_ids"], r["loss_mask"]) for r in train_rows(tmp_path / "tok"))
    train = tmp_path / "tok" / "data" / "default" / "train-00000-of-00001.jsonl"
    theirs = specforge_dflash_prompts(dflash_config(tmp_path, {"prompts_path": str(train)}))
    assert len(ours) == 9 and theirs == ours  # every train row, the same ids and masks


def test_specforge_dflash_renders_the_conversations_as_regen_tokenises_them(tmp_path):
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
    plain = [checkfix.completion(f"c{i}", f"Paris is answer {i}.") for i in range(8)]
    run = checkfix.write_run(tmp_path / "run", plain)
    export(run, tmp_path / "tok", "specforge-tokenized")
    export(run, tmp_path / "conv", "specforge")
    ours = sorted((r["input_ids"], r["loss_mask"]) for r in train_rows(tmp_path / "tok"))
    conv = tmp_path / "conv" / "data" / "default" / "train-00000-of-00001.jsonl"
    cfg = dflash_config(tmp_path, {"train_data_path": str(conv), "chat_template": "regen-chatml"})
    assert specforge_dflash_prompts(cfg) == ours


def test_export_names_the_rows_dflash_would_skip(tmp_path):
    # an empty answer whose template tokens are context: only its end-of-turn is supervised
    short = checkfix.completion("short", "")
    run = checkfix.write_run(tmp_path / "run", [*records(), short])
    text = export(run, tmp_path / "tok", "specforge-tokenized", "--template-tokens", "context")
    rows = {r["id"]: r for r in train_rows(tmp_path / "tok")}
    mask = rows["short"]["loss_mask"]
    assert not any(a and b for a, b in pairwise(mask))
    assert "1 rows that SpecForge's DFlash-family training" in text and "short" in text
    train = tmp_path / "tok" / "data" / "default" / "train-00000-of-00001.jsonl"
    kept = specforge_dflash_prompts(dflash_config(tmp_path, {"prompts_path": str(train)}))
    assert rows["short"]["input_ids"] not in [ids for ids, _ in kept]  # SpecForge skips it too
    assert len(kept) == len(rows) - 1


@pytest.mark.parametrize("field", ["block_size", "target_layer_ids"])
def test_the_recipe_in_the_docs_matches_specforges_config(field):
    text = (Path(__file__).parents[1] / "docs" / "training.md").read_text()
    value = DRAFT.get(field, DRAFT["dflash_config"].get(field))
    assert f"{field}" in text and str(value).replace(" ", "") in text.replace(" ", "")
