"""`regen score --draft DIR` with the drafters users train, on the embedded SmolLM2: a Hugging
Face draft model (the target's first blocks) and an EAGLE-3 head in speculators' format, each
held against a real greedy speculative loop with the same drafter (drafter_helpers.py)."""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from regen.cli import main
from regen.errors import ConfigError
from regen.score import ScoreSettings, score_run
from regen.score.accept import simulate
from regen.score.drafts import CheckpointSettings, open_draft
from regen.score.results import read_rows
from regen.score.rows import Selection

sys.path.insert(0, str(Path(__file__).parent))

from dflash_helpers import dflash_head, dflash_proposer
from drafter_helpers import (
    eagle3_head,
    eagle3_proposer,
    hf_proposer,
    loop_tau,
    specforge_eagle3,
    stored_rows,
    target_dir,
    truncated_draft,
)
from score_helpers import PROMPTS

pytestmark = pytest.mark.model
KS = (3,)  # the loop is the slow part: one k (the replay of other ks is accept.py's)
LAYERS = (2, 15, 30)  # input indices; 30 = the last block's output, before the final norm


@pytest.fixture(scope="module")
def target() -> Path:
    return target_dir()


def score(run: Path, draft, encoder) -> dict:
    settings = ScoreSettings(Selection("category", None, 0), list(range(1, 9)), "embedded")
    return score_run(run, [draft], encoder, settings, run / "score").to_json()["drafts"][0]


def taus(report: dict, k: int) -> dict[str, float]:
    groups = report["groups"]
    return {c: next(a for a in groups[c]["by_k"] if a["k"] == k)["tau"]["value"] for c in PROMPTS}


def assert_matches_loop(report: dict, loop: dict[str, float], k: int) -> None:
    scored = taus(report, k)
    for category in PROMPTS:  # exact in fact: the same tokens, greedy on both sides
        assert scored[category] == pytest.approx(loop[category], rel=0.02), (k, scored, loop)


def test_a_hugging_face_draft_model_scores_as_a_real_loop_accepts(run, encoder, target, tmp_path):
    folder = truncated_draft(target, tmp_path / "smol-24-blocks", blocks=24)
    draft = open_draft(str(folder), threads=1)
    try:
        report = score(run, draft, encoder)
        loops = {k: loop_tau(stored_rows(run), hf_proposer(draft.model), k) for k in KS}
    finally:
        draft.close()
    assert report["groups"]["(overall)"]["rows"] == sum(len(p) for p in PROMPTS.values())
    top1 = report["groups"]["(overall)"]["top1_match"]["value"]
    assert 0.1 < top1 < 0.95, top1  # neither a useless nor an identity draft
    for k in KS:
        assert_matches_loop(report, loops[k], k)


def test_a_draft_with_another_vocabulary_is_refused_with_what_to_do(encoder, tmp_path):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    small = LlamaConfig(
        vocab_size=1000,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
    )
    LlamaForCausalLM(small).save_pretrained(str(tmp_path / "other-vocab"))
    draft = open_draft(str(tmp_path / "other-vocab"))
    with pytest.raises(ConfigError) as err:
        draft.check(encoder.tok)
    assert "does not share the target's vocabulary" in err.value.message
    assert "1000 rows" in err.value.message and "49152 tokens" in err.value.message
    assert "trained on the target's tokenizer" in err.value.hint


def test_an_eagle3_head_is_scored_along_its_own_chain_as_a_real_loop_accepts(
    run, encoder, target, tmp_path
):
    folder = eagle3_head(target, tmp_path / "eagle3", LAYERS, run_ids(run))
    draft = open_draft(str(folder), threads=1, checkpoint=CheckpointSettings(str(target), depth=8))
    try:
        report = score(run, draft, encoder)
        loops = {
            k: loop_tau(stored_rows(run), eagle3_proposer(draft.model, draft.target, LAYERS), k)
            for k in KS
        }
    finally:
        draft.close()
    for k in KS:
        assert_matches_loop(report, loops[k], k)
    # its first step reads the target's own last hidden state: close to the target
    assert report["groups"]["(overall)"]["top1_match"]["value"] > 0.6
    # teacher forcing (its first step's guess at every position, as a draft model is scored)
    # would claim far more than its own chain accepts: the recurrent state matters
    forced = [simulate(_first(row), 4) for row in read_rows(Path(report["rows_file"]))]
    forced_tau = sum(s.tokens for s in forced) / sum(s.steps for s in forced)
    chained = report["groups"]["(overall)"]["by_k"][3]["tau"]["value"]
    assert chained < 0.9 * forced_tau, (chained, forced_tau)


def test_a_specforge_eagle3_head_is_converted_and_scored_as_its_speculators_twin(
    run, encoder, target, tmp_path
):
    # not rope's default theta: the converter must read it where transformers 5 saves it
    head = eagle3_head(target, tmp_path / "eagle3", LAYERS, run_ids(run), rope_theta=1e5)
    folder = specforge_eagle3(head, tmp_path / "specforge-eagle3", LAYERS)
    settings = CheckpointSettings(str(target), depth=4)
    reports, temp = {}, Path(tempfile.gettempdir())
    before = set(temp.glob("regen-specforge-*"))
    for name in (head, folder):
        draft = open_draft(str(name), threads=1, checkpoint=settings)
        try:
            rope = draft.model.rotary_emb.inv_freq.tolist()
            reports[name.name] = (score(run, draft, encoder), draft.notes, rope)
        finally:
            draft.close()
    (twin, _, rope), (converted, notes, its_rope) = reports["eagle3"], reports["specforge-eagle3"]
    assert its_rope == rope  # near-uniform random attention would not show a wrong theta
    assert notes[0] == (
        "specforge-eagle3: converted from SpecForge's format "
        "(LlamaForCausalLMEagle3) with speculators' converter"
    )
    assert "target layers 2, 15, 30 as input indices" in notes[1]  # its 1, 14, 29 shifted
    assert converted["name"] == "specforge-eagle3"
    assert set(temp.glob("regen-specforge-*")) == before  # the converted copy is removed
    for k in (1, 3):  # the same head, so the same chains: the loop's (the EAGLE-3 test above)
        assert taus(converted, k) == pytest.approx(taus(twin, k), rel=1e-9), k


def test_a_specforge_head_without_target_model_or_with_a_raw_state_head_is_refused(tmp_path):
    import json

    folder = tmp_path / "sf"
    folder.mkdir()
    config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError) as err:  # SpecForge's config names no target
        open_draft(str(folder))
    assert "does not name the target" in err.value.message and "--target-model" in err.value.hint
    (folder / "config.json").write_text(json.dumps({**config, "norm_output": False}))
    with pytest.raises(ConfigError) as err:
        open_draft(str(folder), checkpoint=CheckpointSettings("embedded"))
    assert "norm_output false" in err.value.message


def test_a_dflash_drafter_scores_its_blocks_as_a_real_loop_accepts(run, encoder, target, tmp_path):
    folder = dflash_head(target, tmp_path / "dflash", LAYERS, run_ids(run), block=4)
    draft = open_draft(str(folder), threads=1, checkpoint=CheckpointSettings(str(target)))
    try:
        assert "DFlash, block 4, target layers 2, 15, 30 as input indices" in draft.notes[0]
        report = score(run, draft, encoder)
        loops = {
            k: loop_tau(stored_rows(run), dflash_proposer(draft.model, draft.target, LAYERS), k)
            for k in KS
        }
    finally:
        draft.close()
    for k in KS:
        assert_matches_loop(report, loops[k], k)
    overall = report["groups"]["(overall)"]
    assert overall["top1_match"]["value"] > 0.3, overall["top1_match"]
    assert 1.2 < overall["by_k"][2]["tau"]["value"] < 4.0, overall["by_k"][2]


def run_ids(run: Path) -> list[list[int]]:
    return [ids for _, ids, _ in stored_rows(run)]


def _first(row: dict) -> str:
    return "".join("0" if c == "0" else "1" for c in row["lookup"]["right"])


def test_score_names_the_layers_in_both_conventions(run, target, tmp_path):
    folder = eagle3_head(target, tmp_path / "eagle3-cli", LAYERS, run_ids(run), seed=1)
    result = CliRunner().invoke(
        main,
        [
            "score",
            str(run),
            "--draft",
            str(folder),
            "--target-model",
            str(target),
            "--tokenizer",
            "embedded",
            "--all",
            "--k",
            "3",
            "--threads",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    assert (
        "target layers 2, 15, 30 as input indices (vLLM, SGLang, speculators) = 1, 14, 29 "
        "as output indices (SpecForge, ModelOpt, DFlash), of 30 blocks"
    ) in result.output
    assert "eagle3-cli" in result.output and "tau" in result.output.lower()
    nowhere = CliRunner().invoke(
        main,
        [
            "score",
            str(run),
            "--draft",
            str(folder),
            "--target-model",
            str(tmp_path / "nowhere"),
            "--tokenizer",
            "embedded",
        ],
    )
    assert nowhere.exit_code == 2, nowhere.output
    assert "not a local Hugging Face folder (--target-model" in nowhere.output
    assert "hint: pass --target-model DIR" in nowhere.output


def test_a_draft_model_on_sampled_answers_gets_min_one_q_over_p(tmp_path):
    """At temperature 1 with the target's logprobs, each answer token gets min(1, q/p): 1 where
    the target's probability is the draft's own, 1/2 where it is twice the draft's."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from regen.score.outcome import Accept
    from regen.score.sampled import DrawnAt
    from regen.score.tokens import TokenRow

    torch.manual_seed(0)
    tiny = LlamaConfig(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
    )
    LlamaForCausalLM(tiny).save_pretrained(str(tmp_path / "tiny"))
    draft = open_draft(str(tmp_path / "tiny"), threads=1)
    ids, start = [5, 17, 42, 99, 7, 250, 3], 3
    with torch.no_grad():
        logq = torch.log_softmax(draft.model(input_ids=torch.tensor([ids])).logits[0], dim=-1)
    own = [float(logq[i - 1, ids[i]]) for i in range(start, len(ids))]
    got = []
    for shift in (0.0, math.log(2)):
        row = TokenRow(
            "r",
            0,
            ids,
            start,
            {"category": "chat"},
            False,
            DrawnAt(1.0),
            [lp + shift for lp in own],
        )
        draft.run([row], lambda _row, outcome: got.append(outcome))
    assert all(isinstance(o, Accept) for o in got)
    assert got[0].probabilities() == pytest.approx([1.0] * 4)
    assert got[1].probabilities() == pytest.approx([0.5] * 4, abs=0.006)  # kept in 1/89 steps
