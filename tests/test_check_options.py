"""`regen check`'s options on the rules: --show prints the failing samples, every rule can
be tuned or turned off, and the per-sample file names each sample's rule hits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from check_helpers import check, healthy


def test_show_prints_the_failing_samples_not_the_first(tmp_path):
    records = healthy(30)
    records.insert(
        25, checkfix.completion("loop", "Again and again. " * 300, reasoning="r", thinking="on")
    )
    result, _ = check(tmp_path, records, "--show", "1")
    assert "--- loop (sample 0)" in result.output and "[repetition]" in result.output
    assert "--- web0 " not in result.output and "#0" not in result.output


@pytest.mark.parametrize("rule", ["repetition", "echo_prompt", "bad_tool_call", "near_duplicates"])
def test_every_new_rule_can_be_tuned_or_turned_off(tmp_path, rule):
    result, report = check(tmp_path, healthy(5), "--max", f"{rule}=off")
    assert rule not in [r["rule"] for r in report["rules"]] and result.exit_code == 0


def test_per_sample_file_names_each_samples_rule_hits(tmp_path):
    planted = [
        checkfix.completion("empty", "", reasoning="r", thinking="on"),
        checkfix.completion(
            "cut",
            "The capital of France is Paris, and",
            reasoning="r",
            thinking="on",
            finish="length",
        ),
        checkfix.completion("loop", "Again and again. " * 300, reasoning="r", thinking="on"),
        checkfix.completion(
            "twice",
            healthy(1)[0]["messages"][-1]["content"],
            reasoning=healthy(1)[0]["messages"][-1]["reasoning_content"],
            thinking="on",
        ),
    ]
    per_sample = tmp_path / "samples.jsonl"
    _, report = check(tmp_path, healthy() + planted, "--per-sample", str(per_sample))
    flags = {s["id"]: s["flags"] for s in map(json.loads, per_sample.read_text().splitlines())}
    assert {"empty_answer", "degenerate"} <= set(flags["empty"])
    assert "truncated" in flags["cut"]
    assert "repetition" in flags["loop"]
    assert flags["twice"] == ["duplicate_answers"]  # the repeat, not the first of the pair
    assert flags["web0"] == [] and flags["web7"] == []
    assert report["overall"]["flags"]["empty_answer"] == 1
