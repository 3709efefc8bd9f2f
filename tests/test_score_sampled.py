"""Acceptance at the temperature the answers were drawn at: the estimate min(1, q(x)/p(x))
against the exact sum_x min(p, q), its verify steps, and what a run must carry for it."""

from __future__ import annotations

import numpy as np
import pytest

from regen.score.accept import simulate
from regen.score.outcome import (
    Accept,
    encode_accept,
    expected_steps,
    from_line,
    steps_of,
    to_fields,
)
from regen.score.sampled import DrawnAt, acceptances, drawn_at, drawn_logprobs

TEMPERATURES = (0.3, 0.7, 1.0, 1.5)


def drawn(logits: np.ndarray, at: DrawnAt) -> np.ndarray:
    """The full drawn distribution of each row, by the same code path, for exact sums."""
    vocab = np.arange(logits.shape[1])
    return np.stack(
        [np.exp(drawn_logprobs(np.repeat(row[None], len(vocab), 0), vocab, at)) for row in logits]
    )


@pytest.mark.parametrize("temperature", TEMPERATURES)
@pytest.mark.parametrize(("top_p", "top_k"), [(None, None), (0.9, None), (None, 5), (0.8, 8)])
def test_the_target_as_its_own_draft_scores_k_plus_one(temperature, top_p, top_k):
    rng = np.random.default_rng(7)
    logits = rng.normal(0, 3, size=(150, 32))  # more rows than one block of drawn_logprobs
    at = DrawnAt(temperature, top_p, top_k)
    p = drawn(logits, at)
    answer = [rng.choice(32, p=row) for row in p]  # the run's own draws from the target
    logp = np.log(p[np.arange(150), answer])
    accept = acceptances(drawn_logprobs(logits, answer, at), logp.tolist())
    assert accept == pytest.approx([1.0] * 150)
    for k in (1, 3, 5):
        row = steps_of(encode_accept(accept), k)
        full = row.runs[k]  # every step but one near the end accepts all k drafts
        assert full >= row.steps - 1 and row.tau == pytest.approx(simulate("1" * 150, k).tau)


def test_the_estimate_averages_to_the_overlap_of_p_and_q():
    """E_{x~p} min(1, q(x)/p(x)) = sum_x min(p(x), q(x)): checked in expectation, not by draws."""
    rng = np.random.default_rng(3)
    target, draft = rng.normal(0, 2, size=(6, 20)), rng.normal(0, 2, size=(6, 20))
    for temperature in TEMPERATURES:
        at = DrawnAt(temperature, 0.95, None)
        p, q = drawn(target, at), drawn(draft, at)
        vocab = np.arange(20)
        for i in range(6):
            seen = p[i] > 0
            a = acceptances(
                drawn_logprobs(np.repeat(draft[i][None], 20, 0), vocab, at),
                np.log(np.where(seen, p[i], 1.0)).tolist(),
            )
            estimate = float(np.sum(p[i] * np.array(a)))
            assert estimate == pytest.approx(float(np.minimum(p[i], q[i]).sum()), abs=1e-9)


def test_expected_steps_equal_the_simulation_on_certain_outcomes():
    for matches in ("1101111", "0000", "1" * 30, "10" * 12, "1"):
        for k in (1, 2, 3, 8):
            want, got = simulate(matches, k), expected_steps([float(c) for c in matches], k)
            assert (got.steps, got.accepted, got.tau) == pytest.approx(
                (want.steps, want.accepted, want.tau)
            )
            assert list(got.runs) == pytest.approx(list(want.runs))


def test_expected_steps_by_hand():
    # k=2, positions 1 and 2 accept with 0.5 each: a step at 1 accepts 0 (0.5, next at 2),
    # 1 (0.25, next at 3: the end) or 2 (0.25); the one at 2 (chance 0.5) accepts 0 or 1
    # (0.25 each: past the end is rejected)
    row = expected_steps([1.0, 0.5, 0.5], 2)
    assert row.steps == pytest.approx(1.5)
    assert list(row.runs) == pytest.approx([0.75, 0.5, 0.25])
    assert row.accepted == pytest.approx(0.5 * 1 + 0.25 * 2)


def test_sampled_rows_keep_their_levels_in_one_character_each():
    accept = encode_accept([0.0, 1.0, 0.5, 0.123])
    assert len(accept.levels) == 4 and '"' not in accept.levels and "\\" not in accept.levels
    assert accept.probabilities()[:2] == [0.0, 1.0]
    assert accept.probabilities()[3] == pytest.approx(0.123, abs=0.006)
    assert from_line(to_fields(accept)) == accept and isinstance(accept, Accept)


def test_what_a_record_says_about_its_draw():
    vllm = {"meta": {"sampling": {"temperature": 0.7, "top_p": None}, "engine": {"name": "vllm"}}}
    assert drawn_at(vllm) == DrawnAt(0.7, None, None, "processed")
    assert drawn_at(vllm).logprobs_fit() is None
    vllm["meta"]["speculative_decoding"] = {"num_spec_steps": 3}  # regen serve left it raw
    assert "raw model" in drawn_at(vllm).logprobs_fit()
    llama = {
        "meta": {
            "sampling": {
                "temperature": None,
                "neutral": {"temperature": 1.0, "top_p": 1.0, "top_k": 0},
            },
            "engine": {"name": "llamacpp"},
        }
    }
    assert drawn_at(llama).logprobs_fit() is None  # raw logprobs are the draw at neutral values
    llama["meta"]["sampling"]["temperature"] = 0.7
    assert "raw model" in drawn_at(llama).logprobs_fit()
    sglang = {
        "meta": {"sampling": {"temperature": 0.7, "top_p": 0.9}, "engine": {"name": "sglang"}}
    }
    assert "before top-k/top-p" in drawn_at(sglang).logprobs_fit()
    unknown = {"meta": {"sampling": {"temperature": None}, "engine": {"name": "vllm"}}}
    assert "default temperature" in drawn_at(unknown).logprobs_fit()
