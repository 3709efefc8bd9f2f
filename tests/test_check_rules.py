"""Each planted defect fails its rule, and each healthy-but-unusual set passes.

Sets are built from 40 healthy samples plus the planted ones; templates are real Jinja
rendered with a real (trained-here) tokenizer, the defects written into copies of it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.cli import main

QWEN = (checkfix.HERE / "qwen3_style.jinja").read_text()
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}


healthy = checkfix.healthy


def check(tmp_path: Path, records: list[dict], *args: str, template: str | None = None):
    run = checkfix.write_run(tmp_path / "run", records)
    extra: list[str] = []
    if template is not None:
        (tmp_path / "t.jinja").write_text(template)
        extra = ["--chat-template", str(tmp_path / "t.jinja")]
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        main,
        [
            "check",
            str(run),
            "--tokenizer",
            str(checkfix.qwen_style_dir()),
            "--json",
            str(out),
            *extra,
            *args,
        ],
    )
    assert result.exit_code in (0, 1), result.output
    return result, json.loads(out.read_text())


def failed(report: dict) -> set[str]:
    return set(report["failed_rules"])


def test_the_healthy_base_passes(tmp_path):
    result, report = check(tmp_path, healthy())
    assert result.exit_code == 0 and failed(report) == set(), result.output


# --- templates: found by rendering ---------------------------------------------------------


def test_template_that_drops_final_reasoning_fails(tmp_path):
    template = QWEN.replace("{{ (m.reasoning_content or '') | trim }}", "")
    result, report = check(tmp_path, healthy(), template=template)
    assert failed(report) == {"reasoning_dropped"} and result.exit_code == 1
    assert report["overall"]["flags"]["reasoning_dropped"] == 40
    assert "FAIL reasoning_dropped" in result.output


def test_template_without_generation_prompt_fails(tmp_path):
    cut = QWEN.index("{%- if add_generation_prompt -%}")
    result, report = check(tmp_path, healthy(), template=QWEN[:cut])
    assert "no_generation_prompt" in failed(report) and result.exit_code == 1


def test_end_of_turn_that_is_not_a_special_token_fails(tmp_path):
    _result, report = check(tmp_path, healthy(), template=QWEN.replace("<|im_end|>", "[END]"))
    assert "unterminated_turn" in failed(report)
    assert report["overall"]["flags"]["unterminated_turn"] == 40


def test_inline_think_with_thinking_auto_renders_two_blocks(tmp_path):
    inline = [
        checkfix.completion(f"in{i}", f"<think>\nStep {i}.\n</think>\n\nParis {i}.")
        for i in range(5)
    ]
    _, report = check(tmp_path, healthy() + inline)
    assert failed(report) == {"double_reasoning"}
    assert report["overall"]["flags"]["double_reasoning"] == 5


def test_inline_think_is_fine_when_the_template_adds_none(tmp_path):
    no_think = QWEN.replace("<think>\n{{ (m.reasoning_content or '') | trim }}\n</think>\n\n", "")
    inline = [
        checkfix.completion(f"in{i}", f"<think>\nStep {i}.\n</think>\n\nParis {i}.")
        for i in range(5)
    ]
    plain = [
        checkfix.completion(f"p{i}", f"Plain answer number {i} about Paris.") for i in range(40)
    ]
    _, report = check(tmp_path, plain + inline, template=no_think)
    assert "double_reasoning" not in report["overall"]["flags"]


# --- what the model wrote ---------------------------------------------------------------------


def test_repetition_loop_ending_with_stop_fails(tmp_path):
    loop = "I will answer now. " * 200
    bad = [
        checkfix.completion(f"loop{i}", f"Answer {i}: {loop}", reasoning=f"r{i}", thinking="on")
        for i in range(2)
    ]
    long_prose = " ".join(f"word{i} follows word{i * 7 % 13} in sentence {i}." for i in range(300))
    fine = checkfix.completion("prose", long_prose, reasoning="r", thinking="on")
    _, report = check(tmp_path, healthy() + bad + [fine])
    assert failed(report) == {"repetition"}
    assert report["overall"]["flags"]["repetition"] == 2


def test_echo_of_user_prompt_and_system_prompt_fail(tmp_path):
    ask = "Please explain in detail why the sky appears blue during the day."
    system = "You are a careful assistant who answers questions about physics precisely."
    echo = checkfix.completion(
        "e1", f"{ask} Because of Rayleigh scattering.", prompt=ask, reasoning="r", thinking="on"
    )
    sysecho = checkfix.completion(
        "e2",
        f"{system} The sky is blue because of scattering.",
        reasoning="r",
        thinking="on",
        history=[{"role": "system", "content": system}, {"role": "user", "content": ask}],
    )
    _, report = check(tmp_path, [*healthy(20), echo, sysecho])
    assert failed(report) == {"echo_prompt", "echo_system"}
    assert report["overall"]["flags"]["echo_prompt"] == 1


def call(name: str, arguments: str, cid: str = "c") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_tool_calls_with_invalid_json_or_unknown_tool_fail(tmp_path):
    bad_json = checkfix.completion(
        "j", "", tools=[WEATHER], tool_calls=[call("get_weather", '{"city": "Ber')]
    )
    unknown = checkfix.completion(
        "u", "", tools=[WEATHER], tool_calls=[call("send_email", '{"to": "x"}')]
    )
    _, report = check(tmp_path, [*healthy(), bad_json, unknown])
    assert failed(report) == {"bad_tool_call"}
    assert report["overall"]["flags"]["bad_tool_call"] == 2


# --- no false failures ------------------------------------------------------------------------


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


# --- composition and --show -------------------------------------------------------------------


def test_composition_drift_when_one_source_mostly_errored(tmp_path):
    from regen.inputs import stable_id

    prompts, completions, errors = [], [], []
    for src, n, ok in (("web", 30, 30), ("code", 30, 3)):
        for i in range(n):
            messages = [{"role": "user", "content": f"{src} question {i}"}]
            pid = stable_id(messages, None)
            prompts.append(
                {
                    "messages": messages,
                    "source": {"dataset": src},
                    "meta": {"category": f"{src}-cat"},
                }
            )
            if i < ok:
                rec = checkfix.completion(
                    pid,
                    f"A full answer to {src} question {i} here.",
                    prompt=messages[0]["content"],
                    source=src,
                    category=f"{src}-cat",
                )
                completions.append(rec)
            else:
                errors.append({"id": pid, "sample": 0, "error": {"type": "http_500"}})
    prompt_file = tmp_path / "prompts.jsonl"
    prompt_file.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    run = checkfix.write_run(tmp_path / "run", completions)
    (run / "errors").mkdir()
    (run / "errors" / "00000.jsonl").write_text("".join(json.dumps(e) + "\n" for e in errors))
    (run / "manifest.json").write_text(json.dumps({"input": {"path": str(prompt_file)}}))
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        main, ["check", str(run), "--tokenizer", str(checkfix.qwen_style_dir()), "--json", str(out)]
    )
    report = json.loads(out.read_text())
    assert "composition_drift" in failed(report) and result.exit_code == 1
    mix = report["composition"]["by_source"]
    assert mix["code"] == {"prompts": 0.5, "completions": 0.0909}
    assert report["composition"]["by_category"]["code-cat"]["prompts"] == 0.5
    assert "composition vs the prompt file" in result.output


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


def test_template_without_tool_call_slot_fails_by_rendering(tmp_path):
    """SmolLM2's real template (from its GGUF) renders no tool calls."""
    calls = [
        checkfix.completion(
            f"t{i}",
            "",
            tools=[WEATHER],
            prompt=f"Weather in {i}?",
            tool_calls=[call("get_weather", json.dumps({"city": f"c{i}"}))],
        )
        for i in range(3)
    ]
    plain = [checkfix.completion(f"p{i}", f"Paris, answer {i}.") for i in range(10)]
    run = checkfix.write_run(tmp_path / "run", plain + calls)
    out = tmp_path / "r.json"
    smol = str(checkfix.smollm2_gguf())
    result = CliRunner().invoke(main, ["check", str(run), "--tokenizer", smol, "--json", str(out)])
    report = json.loads(out.read_text())
    assert "tools_dropped" in failed(report) and result.exit_code == 1
    assert report["overall"]["flags"]["tools_dropped"] == 3
    _, qwen = check(tmp_path / "q", plain + calls)  # the Qwen-style template renders them
    assert "tools_dropped" not in qwen["overall"]["flags"]


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
