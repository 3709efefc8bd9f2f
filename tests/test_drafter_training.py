"""The drafter bench (bench/bench_drafter.py, issues 49 and 57) at CI size: a few dozen prompts
in three domains through the real verbs (prepare, generate, export --format speculators), and
both drafters it trains on the export read back by `regen score --draft`: the layer-skip draft
and the EAGLE-3 head, built and fed by speculators' own model class and data path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import drafter_eagle3 as eagle3  # noqa: E402
import drafter_prompts as prompts  # noqa: E402
import drafter_rows as rows_of  # noqa: E402
import drafter_steps as steps  # noqa: E402
import drafter_train as training  # noqa: E402

pytestmark = pytest.mark.model
ALLOW = ("truncated=1",)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """24 prompts answered by the embedded target (24 tokens each), exported for speculators
    with a draft vocabulary, as the bench exports a pool."""
    root = tmp_path_factory.mktemp("drafter")
    log = root / "commands.log"
    sources = prompts.write_sources(root / "sources", 10, seed=3)
    weights = dict.fromkeys(prompts.DOMAINS, 1.0)
    recipe = prompts.write_recipe(root / "blend.yaml", sources, weights, 24, seed=3)
    blend = steps.prepare(recipe, root / "blend.jsonl", log)
    run = root / "run"
    steps.generate(blend, run, log, server=[], max_tokens=24, temperature=0.0, seed=3, timeout=600)
    flags = ["--format", "speculators", "--draft-vocab-size", "512"]
    export = steps.export([run], root / "export", log, allow=ALLOW, flags=flags)
    from regen.score.checkpoints.hf_target import embedded_folder

    return {"root": root, "log": log, "run": run, "export": export, "target": embedded_folder()}


def test_a_layer_skip_draft_trained_on_the_export_learns_and_score_reads_it(made) -> None:
    rows = rows_of.read_export(made["export"])
    assert len(rows) == 24 and {r.domain for r in rows} == set(prompts.DOMAINS)
    budget = training.Budget(tokens=1500, batch_rows=4, seed=3)
    folder = made["root"] / "layer-skip"
    trained = training.train([r.pair for r in rows], made["target"], folder, budget)
    first, last = trained.first_and_last(span=3)
    assert trained.steps >= 6 and trained.tokens >= 1500
    assert last < first - 1.0, trained.losses  # the loss on the export falls

    scored = steps.score(made["run"], [folder], made["root"] / "score", made["log"], k="3")
    (draft,) = scored["drafts"]
    assert draft["name"] == "layer-skip" and draft["estimate"] == "greedy"
    assert {g: draft["groups"][g]["rows"] for g in prompts.DOMAINS} == dict.fromkeys(
        prompts.DOMAINS, 8
    )
    tau = draft["groups"]["(overall)"]["by_k"][0]["tau"]["value"]
    assert 1.0 <= tau <= 4.0


def test_an_eagle3_head_trains_on_speculators_data_path_and_score_reads_it(made) -> None:
    from regen.score.checkpoints.hf_target import load_causal_lm

    rows = rows_of.read_export(made["export"])
    base = made["root"] / "eagle3"
    data = rows_of.write_jsonl(rows, base / "rows.jsonl")
    prep = eagle3.prepare(data, made["target"], base / "prepared", made["log"])
    target = load_causal_lm(made["target"], 1, "test")
    cache = base / "cache"
    assert eagle3.hidden_states(prep, target, cache) == 24
    assert eagle3.hidden_states(prep, target, cache) == 0  # a second set links, not recomputes
    assert len(list((prep / "hidden_states").glob("hs_*.safetensors"))) == 24

    vocab = made["export"] / "draft_vocab"
    budget = training.Budget(tokens=2500, seed=3)
    folder = made["root"] / "head"
    trained = eagle3.train(prep, made["target"], vocab, folder, budget)
    assert trained.tokens >= 2500 and trained.steps >= 3
    assert trained.losses[-1] < trained.losses[0], trained.losses

    out = made["root"] / "score-head"
    scored = steps.score(made["run"], [folder], out, made["log"], k="3", sample=2)
    (draft,) = scored["drafts"]
    assert draft["estimate"] == "greedy" and draft["groups"]["(overall)"]["rows"] == 6
    tau = draft["groups"]["(overall)"]["by_k"][0]["tau"]["value"]
    assert 1.0 <= tau <= 4.0
