"""`generate --logprobs` on the embedded llama.cpp server (llama-cpp-python, SmolLM2-135M) and
`score` of its answers with the same model as the draft: at regen's neutral settings
(temperature 1, no truncation) the server's raw logprobs are those of the distribution each
token was drawn from, so the target as its own draft accepts (nearly) every token."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import read_lines
from regen.cli import main

EXAMPLES = Path(__file__).parent.parent / "examples" / "prompts.jsonl"
K = 3

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory) -> Path:
    """One embedded run with --logprobs at regen's neutral settings (temperature 1), but for
    the example that asks temperature 0.2."""
    out = tmp_path_factory.mktemp("sampled") / "out"
    command = [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(EXAMPLES),
        "--output-dir",
        str(out),
        "--max-output-tokens",
        "32",
        "--logprobs",
        "--display",
        "none",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_embedded_model_as_its_own_sampling_draft(sampled_run):
    out = sampled_run
    records = read_lines(out, "completions")
    assert records
    for record in records:
        assert len(record["logprobs"]) == record["usage"]["completion_tokens"]
        assert all(lp <= 0 for lp in record["logprobs"])
    # one example asks temperature 0.2: the raw logprobs are not of its draw, so it is skipped
    lowered = [r for r in records if r["meta"]["sampling"]["temperature"] == 0.2]
    assert len(lowered) == 1
    cli = CliRunner().invoke(
        main,
        [
            "score",
            str(out),
            "--draft",
            "embedded",
            "--tokenizer",
            "embedded",
            "--k",
            str(K),
            "--all",
            "--json",
        ],
    )
    assert cli.exit_code == 0, cli.output
    draft = orjson.loads(cli.output)["drafts"][0]
    assert (draft["estimate"], draft["temperature"], draft["draft_sampling"]) == (
        "sampled",
        1.0,
        "probabilistic",
    )
    overall = draft["groups"]["(overall)"]
    # rows re-tokenised from text can split differently from the server's tokens: those are
    # skipped with the reason, never scored against misaligned logprobs
    assert draft["skipped"].get("logprobs_not_drawn") == 1
    assert set(draft["skipped"]) <= {"logprobs_mismatch", "logprobs_not_drawn"}
    assert overall["rows"] >= len(records) / 2
    # min(1, q/p) with q = p: 1 wherever the batched pass and the server's decoding agree
    assert overall["top1_match"]["value"] >= 0.95
    tau = next(at for at in overall["by_k"] if at["k"] == K)["tau"]["value"]
    assert tau >= 0.9 * (K + 1), tau
    text = CliRunner().invoke(
        main,
        [
            "score",
            str(out),
            "--draft",
            "embedded",
            "--tokenizer",
            "embedded",
            "--k",
            str(K),
            "--all",
        ],
    )
    estimate = "estimate: sampled, at temperature 1.0; the draft samples each proposal from"
    assert (
        estimate in text.output
    )  # the table says which estimate it is (resumed: nothing is rescored)
    # the skipped rows are counted of the chosen ones, with an example and the fix
    skipped = sum(draft["skipped"].values())
    assert f"skipped rows: {skipped} of {skipped + overall['rows']} not scored" in text.output
    assert "  logprobs_not_drawn 1, e.g. " in text.output
    assert "--temperature 1 with no top-k/top-p" in text.output


def test_a_draft_with_no_row_scored_fails_with_the_reason_and_the_fix(sampled_run, tmp_path):
    """The run's one answer drawn at temperature 0.2, alone: llama-cpp-python's raw logprobs
    are not of its draw, so no row can be scored. No figure, least of all a greedy one."""
    run = tmp_path / "lowered"
    (run / "completions").mkdir(parents=True)
    shutil.copy(sampled_run / "manifest.json", run / "manifest.json")
    lowered = [
        r
        for r in read_lines(sampled_run, "completions")
        if r["meta"]["sampling"]["temperature"] == 0.2
    ]
    (run / "completions" / "00000.jsonl").write_bytes(orjson.dumps(lowered[0]) + b"\n")
    cli = CliRunner().invoke(
        main,
        [
            "score",
            str(run),
            "--draft",
            "embedded",
            "--tokenizer",
            "embedded",
            "--k",
            str(K),
            "--all",
        ],
    )
    assert cli.exit_code == 3, cli.output
    assert "greedy" not in cli.output.replace("draft_sampling", "")
    assert "estimate: none (no row scored)" in cli.output
    assert "scored no row: all 1 chosen rows were skipped (logprobs_not_drawn 1)" in cli.output
    assert "raw model's logprobs" in cli.output  # the row's own reason
    # the fix that works on this run as it is comes first, then how to generate another
    assert "hint: logprobs_not_drawn: score the run as it is with --target-model embedded" in (
        cli.output
    )
    assert "or generate where the logprobs are those of the draw" in cli.output
    report = orjson.loads((run / "score" / "score.json").read_bytes())["drafts"][0]
    assert (report["estimate"], report["temperature"]) == (None, None)
    assert report["skipped"] == {"logprobs_not_drawn": 1}
    args = ["--draft", "embedded", "--tokenizer", "embedded", "--k", str(K), "--all", "--json"]
    fixed = CliRunner().invoke(main, ["score", str(run), *args, "--target-model", "embedded"])
    assert fixed.exit_code == 0, fixed.output  # as the hint says: scored at its temperature
    draft = orjson.loads(fixed.output)["drafts"][0]
    assert (draft["estimate"], draft["temperature"]) == ("sampled", 0.2)
    assert draft["groups"]["(overall)"]["rows"] == 1 and not draft["skipped"]
