"""`regen score --draft DIR` with a DFlash drafter in each format a team holds: speculators',
z-lab's (the reference checkpoints) and SpecForge's, the latter two converted on the fly by
speculators' own converter. Built from the same weights (dflash_formats.py), they score the
same, in one target pass, and as a real loop with SpecForge's own model class drafts."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest

from regen.errors import ConfigError
from regen.score import ScoreSettings, score_run
from regen.score.drafts import CheckpointSettings, open_draft, open_drafts
from regen.score.rows import Selection

sys.path.insert(0, str(Path(__file__).parent))

from dflash_formats import draft_body, specforge_dflash, specforge_proposer, zlab_dflash
from dflash_helpers import dflash_full_vocab
from drafter_helpers import loop_tau, stored_rows, target_dir
from score_helpers import PROMPTS

pytestmark = pytest.mark.model
LAYERS = (2, 15, 28)  # input indices = 1, 14, 27 as z-lab and SpecForge count them
BLOCKS = 30  # the embedded SmolLM2's


@pytest.fixture(scope="module")
def formats(run, tmp_path_factory) -> dict[str, Path]:
    root, target = tmp_path_factory.mktemp("formats"), target_dir()
    head = dflash_full_vocab(
        target, root / "speculators", LAYERS, [i for _, i, _ in stored_rows(run)]
    )
    return {
        "speculators": head,
        "zlab": zlab_dflash(head, root / "zlab", BLOCKS),
        "specforge": specforge_dflash(head, root / "specforge", BLOCKS),
    }


def taus(report: dict, k: int) -> dict[str, float]:
    groups = report["groups"]
    return {c: next(a for a in groups[c]["by_k"] if a["k"] == k)["tau"]["value"] for c in groups}


def test_each_format_scores_the_same_in_one_pass_as_specforges_own_loop(run, encoder, formats):
    settings = ScoreSettings(Selection("category", None, 0), [1, 2, 3], "embedded")
    checkpoint = CheckpointSettings(str(target_dir()), depth=3)
    temp = Path(tempfile.gettempdir())
    before = set(temp.glob("regen-dflash-*"))
    with open_drafts([str(f) for f in formats.values()], [], "vllm", 1, checkpoint=checkpoint) as d:
        report = score_run(run, d, encoder, settings, run / "score").to_json()["drafts"]
        notes = [line for draft in d for line in draft.notes]
        bodies = [draft_body(draft) for draft in d]
        shared = {id(draft.shared) for draft in d}
        cost = d[0].shared.cost
        loop = loop_tau(stored_rows(run), specforge_proposer(formats["specforge"], d[0].target), 3)
    assert set(temp.glob("regen-dflash-*")) == before  # the converted copies are removed
    assert "zlab: converted from z-lab's DFlash format (DFlashDraftModel)" in notes[1]
    assert "specforge: converted from SpecForge's DFlash format (DFlashDraftModel)" in notes[3]
    for note in (notes[0], notes[2], notes[4]):  # z-lab's 1, 14, 27 shifted by one
        assert "target layers 2, 15, 28 as input indices" in note and "1, 14, 27" in note
    for body in bodies[1:]:  # the converter carried every weight across
        assert body.keys() == bodies[0].keys()
        assert all((body[k] == bodies[0][k]).all() for k in body)
    assert len(shared) == 1 and cost.rows == sum(len(p) for p in PROMPTS.values())
    for k in (1, 2, 3):
        assert taus(report[1], k) == taus(report[0], k) == taus(report[2], k), k
    overall = report[0]["groups"]["(overall)"]
    assert 1.3 < overall["by_k"][2]["tau"]["value"] < 3.9, overall  # neither none nor all
    for category in PROMPTS:  # SpecForge's own forward, drafting as a real loop
        assert taus(report[2], 3)[category] == pytest.approx(loop[category], rel=0.02), loop


def test_other_dflash_kinds_and_mismatches_are_refused_with_what_to_do(formats, tmp_path):
    config = json.loads((formats["zlab"] / "config.json").read_text())
    target = CheckpointSettings(str(target_dir()))

    def refused(change: dict, settings: CheckpointSettings = target) -> ConfigError:
        folder = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        for file in formats["zlab"].iterdir():
            (folder / file.name).symlink_to(file)
        (folder / "config.json").unlink()
        (folder / "config.json").write_text(json.dumps({**config, **change}))
        with pytest.raises(ConfigError) as err:
            open_draft(str(folder), threads=1, checkpoint=settings)
        return err.value

    err = refused({}, CheckpointSettings())
    assert "z-lab DFlash checkpoint does not name the target" in err.message
    err = refused({"architectures": ["DSparkDraftModel"]})
    assert "DFlash family (DSparkDraftModel)" in err.message and "--replay-servers" in err.hint
    err = refused({"dflash_config": {**config["dflash_config"], "projector_type": "domino"}})
    assert "DFlash family (domino)" in err.message
    err = refused({"num_target_layers": 36})
    assert "trained for a target of 36 blocks" in err.message and "has 30" in err.message
    err = refused({"dflash_config": {"block_size": 4, "mask_token_id": 0}})
    assert "names no dflash_config.target_layer_ids" in err.message
    err = refused({"architectures": ["Mystery"], "dflash_config": None, "auto_map": None})
    for kind in ("ForCausalLM", "speculators_model_type", "ForCausalLMEagle3", "DFlashDraftModel"):
        assert kind in err.hint, err.hint
    assert "speculators convert DIR --algorithm eagle3|dflash" in err.hint
