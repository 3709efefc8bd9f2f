"""Healthy-but-unusual sets pass `regen check`: text-less tool-call answers, the same short
answer after distinct reasoning, short answers with thinking off; an empty think wrapper
is still degenerate, and near duplicates are reported beside exact ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from check_helpers import WEATHER, call, check, failed, healthy


def test_text_less_tool_call_answers_are_not_duplicates(tmp_path):
    calls = [
        checkfix.completion(
            f"t{i}",
            "",
            tools=[WEATHER],
            prompt=f"Weather in city {i}?",
            tool_calls=[call("get_weather", json.dumps({"city": f"c{i}"}), f"id{i}")],
        )
        for i in range(20)
    ]
    result, report = check(tmp_path, healthy() + calls)
    assert result.exit_code == 0, result.output
    assert report["overall"]["duplicate_answers"]["count"] == 0


def test_same_short_answer_after_distinct_reasoning_is_not_a_duplicate(tmp_path):
    math = [
        checkfix.completion(
            f"m{i}", "42", reasoning=f"Compute 6 * 7 by way number {i}.", thinking="on"
        )
        for i in range(20)
    ]
    result, report = check(tmp_path, healthy() + math)
    assert result.exit_code == 0, result.output
    copies = [
        checkfix.completion(f"c{i}", "42", reasoning="Same.", thinking="on") for i in range(20)
    ]
    _, report = check(tmp_path, healthy() + copies)
    assert "duplicate_answers" in failed(report)


def test_short_real_answers_with_thinking_off_are_not_degenerate(tmp_path):
    short = [checkfix.completion(f"s{i}", str(4817 + i), thinking="off") for i in range(20)]
    result, report = check(tmp_path, healthy() + short)
    assert result.exit_code == 0, result.output
    assert report["overall"]["degenerate"] == 0
    assert report["overall"]["mask_sum"]["min"] <= 6  # short indeed, and still fine


def test_empty_think_wrapper_is_still_degenerate(tmp_path):
    wrapped = [checkfix.completion(f"w{i}", "OK.", reasoning="", thinking="on") for i in range(20)]
    _, report = check(tmp_path, healthy() + wrapped)
    assert report["overall"]["degenerate"] == 20 and "degenerate" in failed(report)


def test_near_duplicates_are_reported_beside_exact_ones(tmp_path):
    opening = "Here is a long explanation that every one of these answers starts with. " * 8
    near = [
        checkfix.completion(
            f"n{i}", f"{opening} The particular ending is {i}.", reasoning=f"r{i}", thinking="on"
        )
        for i in range(10)
    ]
    result, report = check(tmp_path, healthy() + near)
    assert report["overall"]["near_duplicates"] == 9
    assert report["overall"]["duplicate_answers"]["count"] == 0
    assert "near_duplicates" in failed(report) and "near-duplicates     9" in result.output
