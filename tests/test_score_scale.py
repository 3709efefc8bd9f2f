"""`score` at the size a team trains: the target's hidden-state pass shared by every checkpoint
that reads it, batched under --max-batch-tokens, at --device and --dtype; bf16 on the CPU
held against float32 and against a real greedy loop run in bf16 (drafter_helpers.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from regen.cli import main
from regen.errors import ConfigError
from regen.score import ScoreSettings, score_run
from regen.score.checkpoints.placement import Placement
from regen.score.drafts import CheckpointSettings, open_drafts
from regen.score.results import read_rows
from regen.score.rows import Selection

sys.path.insert(0, str(Path(__file__).parent))

from dflash_helpers import dflash_full_vocab, dflash_proposer
from drafter_helpers import (
    eagle3_head,
    eagle3_proposer,
    hf_proposer,
    loop_tau,
    stored_rows,
    target_dir,
    truncated_draft,
)
from score_helpers import PROMPTS, ROWS

pytestmark = pytest.mark.model
LAYERS = {"eagle3": (2, 15, 30), "dflash": (2, 15, 28)}


@pytest.fixture(scope="module")
def drafters(run, tmp_path_factory) -> dict[str, Path]:
    root, target = tmp_path_factory.mktemp("drafters"), target_dir()
    rows = [ids for _, ids, _ in stored_rows(run)]
    return {
        "draft-model": truncated_draft(target, root / "draft-model", blocks=24),
        "eagle3": eagle3_head(target, root / "eagle3", LAYERS["eagle3"], rows),
        "dflash": dflash_full_vocab(target, root / "dflash", LAYERS["dflash"], rows),
    }


F32 = Placement()


def scored(run, encoder, folders, out, placement=F32, per_group=None) -> tuple:
    """The drafts' reports and, per target pass, its cost."""
    settings = ScoreSettings(Selection("category", per_group, 0), [1, 2, 3], "embedded")
    checkpoint = CheckpointSettings(str(target_dir()), 3, placement.resolved())
    with open_drafts([str(f) for f in folders], [], "vllm", 1, checkpoint=checkpoint) as drafts:
        report = score_run(run, drafts, encoder, settings, out).to_json()["drafts"]
        costs = {id(d.shared): d.shared.cost for d in drafts if hasattr(d, "shared")}
    return report, list(costs.values())


def rows_by_id(run: Path) -> list[tuple[str, tuple[str, list[int], int]]]:
    lines = (run / "completions" / "00000.jsonl").read_text().splitlines()
    rows = stored_rows(run)
    return [(json.loads(line)["id"], row) for line, row in zip(lines, rows, strict=True)]


def outcomes(report: dict) -> dict:
    return {(r["id"], r["sample"]): r.get("lookup") for r in read_rows(Path(report["rows_file"]))}


def tau3(report: dict) -> dict[str, float]:
    return {c: g["by_k"][2]["tau"]["value"] for c, g in report["groups"].items()}


def test_two_checkpoints_side_by_side_cost_one_target_pass(run, encoder, drafters, tmp_path):
    heads = [drafters["eagle3"], drafters["dflash"]]
    alone = [scored(run, encoder, [h], tmp_path / f"alone-{h.name}") for h in heads]
    both, costs = scored(run, encoder, heads, tmp_path / "both")
    (cost,) = costs  # one target, one pass for both
    assert cost.rows == ROWS and cost.forwards == alone[0][1][0].forwards == 1
    assert cost.tokens == alone[0][1][0].tokens == alone[1][1][0].tokens
    for ((report,), _), together in zip(alone, both, strict=True):
        assert outcomes(together) == outcomes(report)  # the union of layers changes nothing


def test_a_batch_bound_packs_rows_and_changes_no_outcome(run, encoder, drafters, tmp_path):
    heads = [drafters["eagle3"]]
    one, (one_cost,) = scored(run, encoder, heads, tmp_path / "a", Placement("cpu", "float32", 1))
    packed, (cost,) = scored(run, encoder, heads, tmp_path / "b", Placement("cpu", "float32", 200))
    assert one_cost.forwards == ROWS  # each row alone: every row is over the bound
    longest = max(len(ids) for _, ids, _ in stored_rows(run))
    assert 1 < cost.forwards < ROWS and cost.padded <= max(200, longest) * cost.forwards
    assert outcomes(packed[0]) == outcomes(one[0])


@pytest.mark.parametrize("kind", ["draft-model", "eagle3", "dflash"])
def test_bf16_on_the_cpu_scores_as_its_own_loop_and_within_2pct_of_float32(
    kind, run, encoder, drafters, tmp_path
):
    folder = drafters[kind]
    # one row per category (seeded): the bf16 loop is the slow part (no bf16 matmuls here)
    (full,), _ = scored(run, encoder, [folder], tmp_path / "f32", per_group=1)
    settings = ScoreSettings(Selection("category", 1, 0), [3], "embedded")
    placement = Placement("cpu", "bfloat16").resolved()
    checkpoint = CheckpointSettings(str(target_dir()), 3, placement)
    with open_drafts([str(folder)], [], "vllm", 1, checkpoint=checkpoint) as (draft,):
        assert next(draft.model.parameters()).dtype.is_floating_point
        assert str(next(draft.model.parameters()).dtype) == "torch.bfloat16"
        (half,) = score_run(run, [draft], encoder, settings, tmp_path / "bf16").to_json()["drafts"]
        if kind == "draft-model":
            propose = hf_proposer(draft.model)
        elif kind == "eagle3":
            propose = eagle3_proposer(draft.model, draft.target, LAYERS[kind])
        else:
            propose = dflash_proposer(draft.model, draft.target, LAYERS[kind])
        chosen = {r["id"] for r in read_rows(Path(half["rows_file"]))}
        loop = loop_tau([row for rid, row in rows_by_id(run) if rid in chosen], propose, 3)
    half_tau = {c: g["by_k"][0]["tau"]["value"] for c, g in half["groups"].items()}
    for category in PROMPTS:  # bf16 against its own bf16 loop
        assert half_tau[category] == pytest.approx(loop[category], rel=0.02), (half_tau, loop)
    overall = tau3(full)["(overall)"]
    assert half_tau["(overall)"] == pytest.approx(overall, rel=0.02), (half_tau, tau3(full))


def test_a_gpu_that_is_not_there_or_a_device_of_no_kind_is_refused():
    with pytest.raises(ConfigError) as err:
        Placement("cuda", "auto").resolved()
    assert "torch sees no CUDA GPU" in err.value.message and "--device cpu" in err.value.hint
    with pytest.raises(ConfigError) as err:
        Placement("tpu")
    assert "expected cpu, cuda, cuda:N or auto" in err.value.message
    assert Placement("auto", "auto").resolved() == Placement("cpu", "float32")
    with pytest.raises(ConfigError):
        Placement("cpu", "float8")


def test_score_refuses_a_gpu_that_is_not_there_before_loading_anything(tmp_path):
    (tmp_path / "run" / "completions").mkdir(parents=True)
    args = ["score", str(tmp_path / "run"), "--draft", "ngram", "--tokenizer", "embedded"]
    result = CliRunner().invoke(main, [*args, "--device", "cuda:1"])
    assert result.exit_code == 2, result.output
    assert "--device cuda:1: torch sees no CUDA GPU" in result.output
    assert "hint: pass --device cpu" in result.output
