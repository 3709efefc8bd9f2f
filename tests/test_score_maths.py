"""The acceptance maths of `regen score` on synthetic match vectors, against values worked
out by hand (each comment shows the verify steps)."""

from __future__ import annotations

import json
import math

import pytest

from regen.errors import ConfigError
from regen.score.accept import Ratio, simulate
from regen.score.compare import Paired, parse_ks
from regen.score.ngram import (
    DEFAULTS,
    NgramDraft,
    NgramSettings,
    from_speculative_config,
    ngram_settings,
    parse_lookup,
)
from regen.score.outcome import decode_counts
from regen.score.tally import Tally
from regen.serve.fleetfile import speculative_config


def test_tau_by_hand():
    # k=3, counted as vLLM does: token 0 is the prefill's. [101] accepts 1 (+1 bonus) -> pos 3;
    # [111] accepts 3 -> pos 7, done: 2 steps, 4 accepted, 1 + 4/2
    row = simulate("1101111", 3)
    assert (row.steps, row.drafted, row.accepted, row.runs) == (2, 6, 4, (0, 1, 0, 1))
    assert row.tau == 3.0
    # k=1: [1] [1] [1] from pos 1 -> 3 steps, each 1 accepted + the bonus
    row = simulate("1101111", 1)
    assert (row.steps, row.accepted, row.runs) == (3, 3, (0, 3)) and row.tau == 2.0


def test_identity_draft_gets_k_plus_one_on_every_full_step():
    for k in range(1, 9):
        row = simulate("1" * 25, k)  # 24 tokens after the prefill's
        assert row.steps == math.ceil(24 / (k + 1))
        assert row.drafted == k * row.steps  # vLLM drafts k also on the last step
        full = 24 // (k + 1)
        assert row.runs[k] == full + (24 % (k + 1) == k)  # a tail of k is a full step too
    assert simulate("1" * 21, 3).tau == 4.0  # 20 tokens after the first: 5 steps of 4
    assert simulate("0" * 9, 4).tau == 1.0  # nothing accepted: one token per step
    assert simulate("1", 3).steps == 0 and simulate("1", 3).tau == 1.0  # the prefill's only


def test_the_last_step_drafts_k_and_misses_past_the_end():
    # "110" at k=3: after the prefill's token one step drafts 3; [10] + nothing past the end
    tally = Tally(3)
    tally.add("110")
    at3 = tally.to_json()["by_k"][2]
    assert at3["per_position"] == [1.0, 0.0, 0.0]
    assert at3["accepted_runs"] == [0, 1, 0, 0]
    assert at3["acceptance_rate"]["value"] == pytest.approx(1 / 3, abs=1e-4)
    assert at3["tau"]["value"] == 2.0


def test_pooled_tally_rates_positions_and_histogram():
    tally = Tally(2)
    for vector in ("1101", "0011"):
        tally.add(vector)
    data = tally.to_json()
    assert data["rows"] == 2 and data["tokens"] == 8
    assert data["top1_match"]["value"] == 5 / 8
    k2 = data["by_k"][1]
    # "1101": [10] -> pos 3, [1] -> done: runs 1, 1. "0011": [01] -> pos 2, [11] -> done:
    # runs 0, 2
    assert k2["accepted_runs"] == [1, 2, 1]
    assert k2["verify_steps"] == 4
    assert k2["tau"]["value"] == 1 + 4 / 4
    # both positions drafted by all 4 steps; position 1 accepted by 3, position 2 by 1
    assert k2["per_position"] == [0.75, 0.25]
    assert k2["acceptance_rate"]["value"] == 0.5


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
    # (tokens, steps) before and after: tau before 12/6 = 2, after 12/4 = 3
    paired.add((6, 3), (6, 2))
    paired.add((6, 3), (6, 2))
    out = paired.to_json()
    assert (out["before"], out["after"], out["difference"]) == (2.0, 3.0, 1.0)
    assert out["ci95_half_width"] == 0.0  # identical rows: no spread


def test_ngram_drafts_what_followed_the_earliest_longest_match_as_vllm_does():
    # vLLM's prompt lookup, min 1 max 2, answer ids[3:] = 1 2 3 1 2 4. Before answer token 1
    # (context 1 2 3 1) the longest earlier suffix is [1] at 0: draft [2 3 1], all right.
    # Before token 2, [1 2] at 0..1: [3 1 2]; before 3, [2 3] at 1..2: [1 2 3], 2 right;
    # before 5, [1 2] first at 0..1 again: the draft may run to the context's end (room 6).
    draft = NgramDraft(NgramSettings(1, 2, "test"))
    found = draft.lookup([1, 2, 3, 1, 2, 3, 1, 2, 4], 3)
    assert decode_counts(found.room) == [0, 3, 3, 3, 3, 6]
    assert decode_counts(found.right) == [0, 3, 3, 2, 1, 0]
    row = found.steps(3)  # step at 1 accepts 3 (+ bonus) -> step at 5 accepts none
    assert (row.steps, row.drafted, row.accepted, row.runs) == (2, 6, 3, (1, 0, 0, 1))
    row = found.steps(1)  # steps at 1, 3 and 5 accept 1, 1 and 0
    assert (row.steps, row.accepted, row.runs) == (3, 2, (1, 2))
    none = draft.lookup([5, 6, 7], 1)  # no earlier n-gram: no draft, so no verify step
    assert none.steps(3).steps == 0 and none.match() == "00"


def test_parse_ks():
    assert parse_ks("3") == [3] and parse_ks("1-4") == [1, 2, 3, 4]
    assert parse_ks("2,4,8") == [2, 4, 8]
    for bad in ("0", "x", "40", ""):
        with pytest.raises(ConfigError):
            parse_ks(bad)


def test_ngram_settings_come_from_the_flag_the_fleet_or_vllms_defaults(tmp_path):
    # what regen serve keeps of its engine arguments, in both spellings vLLM takes
    spec = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'
    assert speculative_config(["--speculative-config", spec, "--x"])["prompt_lookup_max"] == 4
    assert speculative_config([f"--speculative_config={spec}"])["method"] == "ngram"
    assert speculative_config(["--speculative-config", "not json"]) is None
    # vLLM's defaulting: one bound unset takes the other's value, both unset are 5
    served = from_speculative_config({"method": "ngram", "prompt_lookup_max": 4})
    assert (served.min_n, served.max_n) == (4, 4)
    assert from_speculative_config({"method": "eagle3"}) is None
    (tmp_path / "manifest.json").write_text(
        json.dumps(
            {
                "config": {
                    "speculative_config": {
                        "method": "ngram",
                        "prompt_lookup_min": 2,
                        "prompt_lookup_max": 4,
                    }
                }
            }
        )
    )
    assert (ngram_settings(tmp_path, None).min_n, ngram_settings(tmp_path, None).max_n) == (2, 4)
    assert ngram_settings(tmp_path, "1-3") == NgramSettings(1, 3, "--ngram-lookup")
    assert ngram_settings(tmp_path / "empty", None) == DEFAULTS
    for bad in ("3-1", "x", "0-2"):
        with pytest.raises(ConfigError, match=r"ngram-lookup|n-gram lookup"):
            parse_lookup(bad)


def test_each_tau_shows_its_verify_steps_and_a_few_step_figure_is_marked(tmp_path):
    """tau(1) from 40 steps stands; tau(8) from 4 steps is marked, with the legend, and the
    steps behind every figure are printed under the table and kept in score.json."""
    from regen.score.report import FEW_STEPS, OVERALL, DraftScore, ScoreReport
    from regen.score.table import render_text

    tally = Tally(8)
    tally.add("1" * 81)  # 80 after the prefill's: k=1, 40 steps of 2 tokens; k=8, 9 of 9
    draft = DraftScore(
        "d", {}, tmp_path / "rows.jsonl", 1, groups={OVERALL: tally}, temperatures={0.0}
    )
    report = ScoreReport("run", "category", [1, 8], None, 0, [draft], {})
    text = render_text(report)
    by_k = report.to_json()["drafts"][0]["groups"][OVERALL]["by_k"]
    assert [(at["k"], at["verify_steps"], at["few_steps"]) for at in by_k] == [
        (1, 40, False),
        (8, 9, True),
    ]
    assert report.to_json()["few_steps_below"] == FEW_STEPS == 30
    lines = text.splitlines()
    table = lines[lines.index("group      rows  tokens  top-1  tau(1)  tau(8)") :]
    assert table[1].split() == ["(overall)", "1", "81", "1.00", "2.00", "9.00*"]
    assert table[2].split() == ["verify", "steps", "tau(1)", "tau(8)"]
    assert table[3].split() == ["(overall)", "40", "9"]
    assert table[4] == "* from fewer than 30 verify steps: too few to go by"
