"""The drafter bench (bench/bench_drafter.py, issue 49) at CI size: a few dozen prompts in
three domains through the real verbs, a few training steps of the layer-skip draft on the
export, and `regen score` reading the trained draft on the held-out prompts."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import drafter_prompts as prompts  # noqa: E402
import drafter_steps as steps  # noqa: E402
import drafter_train as training  # noqa: E402


def test_a_draft_trained_on_the_export_learns_and_score_reads_it(tmp_path: Path) -> None:
    log = tmp_path / "commands.log"
    sources = prompts.write_sources(tmp_path / "sources", 10, seed=3)
    weights = dict.fromkeys(prompts.DOMAINS, 1.0)
    recipe = prompts.write_recipe(tmp_path / "blend.yaml", sources, weights, 24, seed=3)
    blend = steps.prepare(recipe, tmp_path / "blend.jsonl", log)
    run = tmp_path / "run"
    steps.generate(blend, run, log, server=[], max_tokens=24, temperature=0.0, seed=3, timeout=600)
    report = steps.check(run, tmp_path / "check.json", log, allow=("truncated=1",))
    assert report["verdict"] == "pass", report["failed_rules"]
    export = steps.export(
        run, tmp_path / "export", log, holdout=0.25, seed=3, allow=("truncated=1",)
    )
    held = training.split_ids(export, "holdout")
    rows = training.export_rows(export, "train", drop_ids=held)
    assert len(held) == 6 and len(rows) == 18  # a quarter of each domain held out, by prompt
    assert all(sum(mask) > 0 and len(mask) == len(ids) for ids, mask in rows)

    from regen.score.checkpoints.hf_target import embedded_folder

    budget = training.Budget(tokens=1500, batch_rows=4, lr=2e-3, seed=3)
    trained = training.train(rows, embedded_folder(), tmp_path / "draft", budget)
    first, last = trained.first_and_last(span=3)
    assert trained.steps >= 6 and trained.tokens >= 1500
    assert last < first - 1.0, trained.losses  # the loss on the export falls

    scored = steps.score(
        run, [trained.folder], tmp_path / "score", log, holdout=0.25, seed=3, k="3"
    )
    (draft,) = scored["drafts"]
    assert draft["name"] == "draft" and draft["estimate"] == "greedy"
    assert {g: draft["groups"][g]["rows"] for g in prompts.DOMAINS} == {
        "code": 2,
        "math": 2,
        "chat": 2,
    }
    tau = draft["groups"]["(overall)"]["by_k"][0]["tau"]["value"]
    assert 1.0 <= tau <= 4.0
