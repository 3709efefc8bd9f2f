"""`regen check` end to end: the verdict, the rules it names, exit codes and the reports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


healthy = checkfix.healthy


def six_tokens(n: int) -> list[dict]:
    """The incident: an empty reasoning and a boilerplate answer wrapped in the template."""
    return [
        checkfix.completion(f"bad{i}", "OK.", reasoning="", thinking="on", source="old")
        for i in range(n)
    ]


def run_check(tmp_path: Path, records: list[dict], *args: str):
    run = checkfix.write_run(tmp_path / "run", records)
    tok = str(checkfix.qwen_style_dir())
    json_path = tmp_path / "report.json"
    result = CliRunner().invoke(
        main, ["check", str(run), "--tokenizer", tok, "--json", str(json_path), *args]
    )
    report = json.loads(json_path.read_text()) if json_path.exists() else None
    return result, report


def test_six_token_dataset_fails_and_names_the_rule(tmp_path):
    result, report = run_check(tmp_path, healthy(13) + six_tokens(87))
    assert result.exit_code == 1, result.output
    assert "verdict: FAIL" in result.output and "degenerate" in result.output
    assert {"degenerate", "missing_reasoning", "duplicate_answers"} <= set(report["failed_rules"])
    old = report["sources"]["old"]
    assert old["mask_sum"]["at_or_below"] == 87 and old["mask_sum"]["max"] <= 10
    assert old["top_prefixes"][0] == ["OK.", 87]
    assert report["overall"]["mask_sum"]["histogram"]["counts"][4] == 87  # the 8-15 bin


def test_healthy_dataset_passes(tmp_path):
    result, report = run_check(tmp_path, healthy(40) + healthy(10, "code"))
    assert result.exit_code == 0, result.output
    assert report["verdict"] == "pass" and set(report["sources"]) == {"code", "web"}
    assert report["overall"]["output_tokens"]["p50"] > 20
    # no manifest: composition is not compared, and the report says why (no silent skip)
    assert "no manifest.json" in report["composition"]["unavailable"]
    assert "composition_drift" not in [r["rule"] for r in report["rules"]]
    assert "composition: not compared" in result.output


def test_truncation_too_long_and_short_runs_are_counted(tmp_path):
    records = healthy(10)
    records[0]["finish_reason"] = records[1]["finish_reason"] = "length"
    args = ("--max-length", "40", "--min-run", "1000", "--max", "short_runs=off")
    result, report = run_check(tmp_path, records, *args)
    overall = report["overall"]
    assert overall["truncated"] == 2 and overall["too_long"]["count"] == 10
    assert overall["short_runs"]["count"] == 10
    assert "short_runs" not in [r["rule"] for r in report["rules"]]
    assert set(report["failed_rules"]) == {"truncated", "too_long"} and result.exit_code == 1


def test_token_id_mismatch_is_reported(tmp_path):
    records = healthy(4)
    for rec in records:
        rec["token_ids"] = {"prompt": [], "completion": [5, 6, 7]}
    result, report = run_check(tmp_path, records)
    assert report["overall"]["token_ids"] == {"checked": 4, "mismatched": 4}
    assert "token_mismatch" in report["failed_rules"] and result.exit_code == 1


def test_unusable_lines_are_mask_errors(tmp_path):
    records = [*healthy(5), {"id": "x", "messages": [{"role": "user", "content": "hi"}]}]
    result, report = run_check(tmp_path, records)
    assert report["overall"]["errors"] == {"no_assistant": 1}
    assert "mask_errors" in report["failed_rules"] and result.exit_code == 1


def test_user_mistakes_exit_2_without_traceback(tmp_path):
    result, _ = run_check(tmp_path, healthy(2), "--max", "nonsense=1")
    assert result.exit_code == 2 and "Traceback" not in result.output
    result = CliRunner().invoke(main, ["check", str(tmp_path / "nope"), "--tokenizer", "x.gguf"])
    assert result.exit_code == 2 and "Error:" in result.output


def test_show_marks_supervised_tokens(tmp_path):
    result, _ = run_check(tmp_path, healthy(3), "--show", "1")
    assert "⟦<think>\nThe user asks question 0" in result.output
    assert "this is web answer 0 with more words.<|im_end|>⟧" in result.output


def test_smollm2_gguf_tokenizer_via_cli(tmp_path):
    plain = [checkfix.completion(f"p{i}", f"Paris is the capital, answer {i}.") for i in range(5)]
    run = checkfix.write_run(tmp_path / "run", plain)
    result = CliRunner().invoke(
        main, ["check", str(run), "--tokenizer", str(checkfix.smollm2_gguf())]
    )
    assert "samples             5" in result.output
    assert result.exit_code == 0, result.output


def test_smollm2_template_has_no_reasoning_slot(tmp_path):
    """SmolLM2's real template renders no reasoning: data with reasoning fails, by rendering."""
    run = checkfix.write_run(tmp_path / "run", healthy(5))
    result = CliRunner().invoke(
        main, ["check", str(run), "--tokenizer", str(checkfix.smollm2_gguf())]
    )
    assert result.exit_code == 1 and "FAIL reasoning_dropped" in result.output


def test_html_report_renders_in_headless_chromium(tmp_path):
    # Not skipped when missing: "the page renders in a real browser" is part of done.
    assert CHROMIUM, "needs a headless browser: apt-get update && apt-get install -y chromium"
    html = tmp_path / "report.html"
    long_name = "a-very-long-source-name/with-a-config-and-split-name-in-it"
    records = healthy(10) + six_tokens(20) + healthy(3, long_name)
    result, _ = run_check(tmp_path, records, "--html", str(html))
    assert result.exit_code == 1
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,1400",
    ]
    # The page has no script; this copy gets one that reports the laid-out width.
    probe = tmp_path / "probe.html"
    probe.write_text(
        html.read_text().replace(
            "</body>",
            "<script>document.title = 'W=' + document.documentElement.scrollWidth;</script></body>",
        )
    )
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "Verdict: FAIL" in dom and "degenerate" in dom
    assert dom.count('<svg class="plot"') == 5
    assert "≤ 10: 20 samples" in dom  # the threshold is a line, with what the rule counts
    assert "supervised tokens" in dom and ">samples<" in dom  # axes carry their units
    assert long_name in dom.replace("<wbr>", "")  # labels are not cut (they may wrap at /)
    width = int(dom.split("<title>W=")[1].split("<")[0])
    assert width <= 1280, f"the page is {width} px wide at a 1280 px window"
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={shot}", html.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def chromium_dom(tmp_path: Path, html: Path) -> str:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,1400",
    ]
    return subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", html.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def test_html_report_says_what_it_judged_and_lists_the_failing_samples(tmp_path):
    """A report handed on names its runs, tokenizer, model, template, date and version, and
    shows each failing sample once, with every rule it breaks and its supervised text."""
    assert CHROMIUM, "needs a headless browser: apt-get update && apt-get install -y chromium"
    html = tmp_path / "report.html"
    result, _ = run_check(tmp_path, healthy(10) + six_tokens(20), "--html", str(html))
    assert result.exit_code == 1
    assert "--- bad0" not in result.output  # without --show the terminal shows no samples
    dom = chromium_dom(tmp_path, html)
    about = dom.split("What was judged")[1].split("</table>")[0]
    for field in ("runs", "tokenizer", "generated with", "chat template", "date", "regen"):
        assert f"<th>{field}</th>" in about
    assert str(tmp_path / "run") in about and str(checkfix.qwen_style_dir()) in about
    assert "sha256 " in about and "0.1.0" in about
    failing = dom.split("Failing samples")[1]
    assert "<h3>bad0 (sample 0)</h3>" in failing  # the id as given, the sample apart
    assert "bad0#0" not in dom  # never a glued name the user did not write
    block = failing.split("<h3>bad0 (sample 0)</h3>")[1].split("</div>")[0]
    assert "degenerate" in block and "missing_reasoning" in block  # all its rules, once
    assert failing.count("<h3>bad0 (sample 0)</h3>") == 1
    assert "⟦" in block and "OK." in block  # the marked render that --show prints


def test_text_report_lists_every_category(tmp_path):
    records = [
        checkfix.completion(f"c{i}", f"answer number {i} in full words.", category=f"cat{i}")
        for i in range(8)
    ]
    result, _ = run_check(tmp_path, records)
    line = next(x for x in result.output.splitlines() if x.startswith("  categories"))
    assert all(f"cat{i} 1" in line for i in range(8)), line


def test_the_report_calls_sources_by_their_recipe_names(tmp_path, monkeypatch):
    """prepare records the recipe's name of each source, and check's reports use it (not
    the file or Hub path it was read from)."""
    assert CHROMIUM, "needs a headless browser: apt-get update && apt-get install -y chromium"
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, ["demo"]).exit_code == 0
    prepared = runner.invoke(main, ["prepare", "examples/recipe.yaml", "-o", "prompts.jsonl"])
    assert prepared.exit_code == 0, prepared.output
    prompts = [json.loads(line) for line in Path("prompts.jsonl").read_text().splitlines()]
    assert {p["source"]["name"] for p in prompts} >= {"hermes_fc", "metamath", "webinstruct"}
    records = []
    for i, prompt in enumerate(prompts):
        rec = checkfix.completion(prompt["id"], f"a full answer, number {i}.")
        records.append(rec | {"source": prompt["source"]})
    html = tmp_path / "report.html"
    result, report = run_check(tmp_path, records, "--html", str(html))
    assert "== source hermes_fc" in result.output
    assert "hermes_function_calling.jsonl" not in result.output
    assert set(report["sources"]) == {p["source"]["name"] for p in prompts}
    by_source = chromium_dom(tmp_path, html).split("By source")[1].split("</table>")[0]
    names = [re.sub(r"<wbr>", "", n) for n in re.findall(r'<th class="name">(.*?)</th>', by_source)]
    assert sorted(names) == sorted({*report["sources"], "(overall)"})


def test_output_tokens_are_the_engines_count_that_the_cap_bounds(tmp_path):
    # Capped at 64 by the engine: its count is what the cap bounds; the templated span of the
    # turn adds the closing tokens, which read as over the cap (the new user's 259 of 256).
    long = " ".join(f"word{i}" for i in range(200))
    capped = [
        checkfix.completion(f"c{i}", long, finish="length", completion_tokens=64) for i in range(3)
    ]
    ids = {"prompt": [1, 2, 3], "completion": list(range(5, 45))}  # the engine's own: 40
    stored = [checkfix.completion("ids", long, token_ids=ids, completion_tokens=64)]
    history = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Count."},
    ]
    turns = [
        checkfix.completion("turns", long, history=history, regenerated=2, completion_tokens=30)
    ]  # the last request's 30, not 60
    _, report = run_check(tmp_path / "a", capped + stored + turns)
    counted = report["overall"]["output_tokens"]
    assert (counted["min"], counted["max"], counted["mean"]) == (30, 64, 52.4), counted
    # where the row does not say: the answer's own text re-tokenised, without the template
    _, bare = run_check(tmp_path / "b", [checkfix.completion("bare", long)])
    own = bare["overall"]["output_tokens"]["max"]
    assert 200 <= own < bare["overall"]["mask_sum"]["max"]  # the mask holds the closing tokens


def test_an_html_path_that_cannot_be_written_fails_before_the_report_is_built(tmp_path):
    """A file where the folder should be, or a folder where the file should be: exit 2 at
    once (the command names the wrong place; 6 is a disk that refuses), naming --html, with
    nothing judged, printed or written first."""
    blocker = tmp_path / "reports"
    blocker.write_text("not a folder")
    for html, why in [(blocker / "r.html", f"{blocker} is a file"), (tmp_path, "it is a folder")]:
        result, report = run_check(tmp_path, healthy(5), "--html", str(html))
        assert result.exit_code == 2, result.output
        assert f"cannot write --html {html}: {why}" in result.output
        assert "verdict" not in result.output and report is None  # nothing built, no --json
