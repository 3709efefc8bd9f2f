"""What drafts are compared by across the whole answer (issue 54): answer tokens per target
forward. An n-gram draft that finds a match nine times in 200 tokens reads tau 5.0 from its
nine steps, and saves the target almost nothing; a draft model's tau and its tokens per
forward tell the same story."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from regen.finished.encode import Encoder
from regen.score import ScoreSettings, score_run
from regen.score.accept import simulate
from regen.score.ngram import NgramDraft, NgramSettings
from regen.score.outcome import Lookup, encode_accept, encode_counts
from regen.score.rows import Selection
from regen.score.table import render_text
from regen.score.tally import Tally
from regen.tokenizer import load_tokenizer

K = 4


def at_k(outcome) -> dict:
    tally = Tally(K)
    tally.add(outcome)
    return tally.to_json()["by_k"][K - 1]


def test_an_ngram_with_few_steps_saves_few_forwards_whatever_its_tau():
    room, right = [0] * 200, [0] * 200
    for step in range(1, 10):  # nine full matches, every one right
        room[20 * step] = right[20 * step] = K
    ngram = at_k(Lookup(encode_counts(room), encode_counts(right)))
    assert ngram["tau"]["value"] == 5.0 and ngram["verify_steps"] == 9
    # 1 prefill + 9 verify steps + 154 positions decoded alone, for 200 tokens
    assert ngram["tokens_per_forward"]["value"] == round(200 / 164, 4)
    model = at_k("1110" * 50)  # a draft model: three right, one wrong, all along
    steps = simulate("1110" * 50, K).steps  # it drafts at every position: no plain forward
    assert model["tau"]["value"] > 3.9 and model["verify_steps"] == steps
    assert model["tokens_per_forward"]["value"] == round(200 / (1 + steps), 4) > 3.5
    identity = at_k(encode_accept([1.0] * 13))  # a draft that samples, accepted everywhere
    assert identity["tokens_per_forward"]["value"] == round(13 / (1 + 3), 4)


def test_without_a_draft_a_forward_is_a_token():
    assert at_k(Lookup(encode_counts([0] * 50), encode_counts([0] * 50)))["tokens_per_forward"][
        "value"
    ] == pytest.approx(1.0)


def synthetic_run(root: Path) -> Path:
    """Answers that repeat their prompt's words now and then: the n-gram drafts a little."""
    lines = []
    for i in range(6):
        prompt = [1, *range(100 + i, 140 + i), 2]
        answer = [*range(300, 330), *range(110 + i, 118 + i), *range(400, 440)]
        rec = {
            "id": f"r{i}",
            "sample": 0,
            "category": "qa",
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
            "token_ids": {"prompt": prompt, "completion": answer},
        }
        lines.append(json.dumps(rec))
    (root / "completions").mkdir(parents=True)
    (root / "completions" / "00000.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_the_side_by_side_table_puts_tokens_per_forward_beside_tau(tmp_path):
    run = synthetic_run(tmp_path / "run")
    drafts = [NgramDraft(NgramSettings(2, 4, "test")), NgramDraft(NgramSettings(1, 2, "test"))]
    settings = ScoreSettings(Selection("category", None, 0), [K], "embedded")
    encoder = Encoder.of(load_tokenizer("embedded"))
    report = score_run(run, drafts, encoder, settings, tmp_path / "score")
    text = render_text(report)
    assert "answer tokens per target forward over the whole answer" in text
    assert "ngram tau" in text and "ngram tok/fwd" in text
    for draft in report.to_json()["drafts"]:
        at = draft["groups"]["(overall)"]["by_k"][0]
        assert at["tau"]["value"] > 2 > at["tokens_per_forward"]["value"] > 1
