"""Each planted defect fails its rule, and each healthy-but-unusual set passes.

Sets are built from 40 healthy samples plus the planted ones; templates are real Jinja
rendered with a real (trained-here) tokenizer, the defects written into copies of it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from check_helpers import QWEN, WEATHER, call, check, failed, healthy
from regen.cli import main


def test_the_healthy_base_passes(tmp_path):
    result, report = check(tmp_path, healthy())
    assert result.exit_code == 0 and failed(report) == set(), result.output


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
