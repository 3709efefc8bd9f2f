"""The acceptance maths of `regen score` on synthetic match vectors, against values worked
out by hand (each comment shows the verify steps)."""

from __future__ import annotations

import math

import pytest

from regen.errors import ConfigError
from regen.score.accept import Ratio, Tally, first_miss, simulate
from regen.score.compare import Paired, parse_ks
from regen.score.ngram import NgramDraft


def test_tau_by_hand():
    # k=3: [110] accepts 2 (+1 bonus) -> pos 3; [111] accepts 3 -> done: 7 tokens, 2 steps
    row = simulate("1101111", 3)
    assert (row.steps, row.drafted, row.accepted, row.runs) == (2, 6, 5, (0, 0, 1, 1))
    assert row.tau == 3.5
    # k=1: [1] [0] [1] [1] -> 4 steps of 7 tokens
    row = simulate("1101111", 1)
    assert (row.steps, row.accepted, row.runs) == (4, 3, (1, 3)) and row.tau == 1.75


def test_identity_draft_gets_k_plus_one_on_every_full_step():
    for k in range(1, 9):
        row = simulate("1" * 24, k)
        assert row.steps == math.ceil(24 / (k + 1))
        assert row.runs[k] == row.steps - len(row.short)  # every full step accepts all k
        assert row.accepted == row.drafted  # and the short tail step all it drafted
        assert row.tau == 24 / math.ceil(24 / (k + 1))
    assert simulate("1" * 20, 3).tau == 4.0  # 20 tokens, 5 steps of 4
    assert simulate("0" * 9, 4).tau == 1.0  # nothing accepted: one token per step


def test_short_steps_at_the_end_draft_fewer_positions():
    # "10" at k=3: one step drafts the 2 tokens left, accepts the first
    tally = Tally(3)
    tally.add("10")
    at3 = tally.to_json()["by_k"][2]
    assert at3["per_position"] == [1.0, 0.0, None]
    assert at3["accepted_runs"] == [0, 1, 0, 0]
    assert at3["acceptance_rate"]["value"] == 0.5


def test_pooled_tally_rates_positions_and_histogram():
    tally = Tally(2)
    for vector in ("1101", "0011"):
        tally.add(vector)
    data = tally.to_json()
    assert data["rows"] == 2 and data["tokens"] == 8
    assert data["top1_match"]["value"] == 5 / 8
    k2 = data["by_k"][1]
    # "1101": [11] -> pos 3, [1] -> done: runs 2, 1 (short step). "0011": [0] pos 1,
    # [0] pos 2, [11] -> done: runs 0, 0, 2
    assert k2["accepted_runs"] == [2, 1, 2]
    assert k2["verify_steps"] == 5
    assert k2["tau"]["value"] == 8 / 5
    # position 1 drafted by all 5 steps, accepted by 3; position 2 drafted by 4, accepted by 2
    assert k2["per_position"] == [0.6, 0.5]
    assert k2["acceptance_rate"]["value"] == pytest.approx(5 / 9, abs=1e-4)  # 4 digits kept


def test_ratio_interval_by_hand():
    ratio = Ratio()
    ratio.add(4, 2)
    ratio.add(6, 2)
    # r = 2.5; residuals -1, +1; variance 2; se = sqrt(2 / 2) / mean(y) = 0.5
    assert ratio.value == 2.5
    assert ratio.half_width == pytest.approx(1.959964 * 0.5)
    one = Ratio()
    one.add(3, 1)
    assert one.half_width is None  # one row says nothing about the spread


def test_paired_difference_by_hand():
    paired = Paired()
    # (tokens, steps before, steps after): tau before 12/6 = 2, after 12/4 = 3
    paired.add(6, 3, 2)
    paired.add(6, 3, 2)
    out = paired.to_json()
    assert (out["before"], out["after"], out["difference"]) == (2.0, 3.0, 1.0)
    assert out["ci95_half_width"] == 0.0  # identical rows: no spread


def test_first_miss():
    assert first_miss("1110") == 3 and first_miss("111") is None and first_miss("0") == 0


def test_ngram_guesses_from_the_latest_earlier_occurrence():
    # at the second "1 2" the lookup of [1] (and [3 1]) finds what followed before
    draft = NgramDraft(max_n=2)
    assert draft.matches([1, 2, 3, 1, 2, 3, 1, 2, 4], 3) == "011110"
    assert draft.matches([5, 6, 7], 1) == "00"


def test_parse_ks():
    assert parse_ks("3") == [3] and parse_ks("1-4") == [1, 2, 3, 4]
    assert parse_ks("2,4,8") == [2, 4, 8]
    for bad in ("0", "x", "40", ""):
        with pytest.raises(ConfigError):
            parse_ks(bad)
