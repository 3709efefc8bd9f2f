"""`regen score` on the embedded SmolLM2's drafts: the identity draft, a requantized draft, the
n-gram baseline, a draft with another vocabulary, re-tokenised runs, resume, sampling, the
command line (--json, --baseline, a bad draft), workers and logprobs that do not line up.
One model of each kind is loaded per module (CPU is scarce); answers are the model's own
greedy decoding."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from regen.cli import main
from regen.finished.score_rows import read_rows
from regen.score.ngram import NgramDraft, NgramSettings
from score_helpers import PROMPTS, ROWS, score, settings

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

pytestmark = pytest.mark.model


def tau(group: dict, k: int) -> float:
    return next(at for at in group["by_k"] if at["k"] == k)["tau"]["value"]


def test_identity_draft_accepts_k_plus_one_wherever_decodings_agree(run, identity, encoder):
    report = score(run, [identity], encoder)
    draft = report["drafts"][0]
    assert draft["retokenized_rows"] == 0  # the stored ids were scored
    overall = draft["groups"]["(overall)"]
    assert overall["rows"] == ROWS
    # teacher-forced and incremental decoding disagree only at rare near-ties
    assert overall["top1_match"]["value"] >= 0.9
    agreeing = [r for r in read_rows(Path(draft["rows_file"])) if "0" not in r["match"]]
    assert agreeing, "no row where the two decodings agree everywhere"
    for row in agreeing:
        assert row["tau"] == [round(identity_tau(row["tokens"], k), 4) for k in range(1, 9)]


def identity_tau(n: int, k: int) -> float:
    """An identity draft over n answer tokens, as vLLM counts: the prefill gives the first;
    every step but the last accepts k, the last what is left (at most k)."""
    steps = math.ceil((n - 1) / (k + 1))
    last = (n - 1) - (steps - 1) * (k + 1)
    return 1 + ((steps - 1) * k + min(k, last)) / steps if steps else 1.0


def test_requantized_draft_scores_between_ngram_and_identity(run, identity, requantized, encoder):
    lookup = NgramDraft(NgramSettings(1, 3, "test"))  # vLLM's 5-5 drafts little on short answers
    report = score(run, [lookup, requantized, identity], encoder)
    ngram, requant, ident = (d["groups"] for d in report["drafts"])
    for category in PROMPTS:
        low, mid, high = (tau(g[category], 3) for g in (ngram, requant, ident))
        assert low < mid <= high, (category, low, mid, high)  # short answers can tie at the top
    top1 = [g["(overall)"]["top1_match"]["value"] for g in (ngram, requant, ident)]
    assert top1[0] < top1[1] < top1[2], top1


def test_a_draft_with_another_vocabulary_is_refused(run):
    other = str(checkfix.qwen_style_dir())  # a 600-token BPE tokenizer as the target
    result = CliRunner().invoke(
        main, ["score", str(run), "--draft", "embedded", "--tokenizer", other]
    )
    assert result.exit_code == 2
    assert "does not share the target's vocabulary" in result.output
    assert "token ids differ" in result.output and "hint:" in result.output


def test_a_run_without_token_ids_says_it_retokenized(run, tmp_path):
    records = [json.loads(line) for line in (run / "completions" / "00000.jsonl").open()]
    text_only = checkfix.write_run(
        tmp_path / "run", [{k: v for k, v in r.items() if k != "token_ids"} for r in records]
    )
    result = CliRunner().invoke(
        main, ["score", str(text_only), "--draft", "ngram", "--tokenizer", "embedded"]
    )
    assert result.exit_code == 0, result.output
    assert f"{ROWS} of {ROWS} rows were re-tokenised" in " ".join(result.output.split())
    report = json.loads((text_only / "score" / "score.json").read_text())
    assert report["drafts"][0]["retokenized_rows"] == ROWS


class Interrupt(Exception):
    pass


def test_an_interrupted_score_resumes_without_rescoring(run, encoder, tmp_path):
    seen: list[str] = []

    def stop_after_three(label: str) -> None:
        seen.append(label)
        if len(seen) == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        score(run, [NgramDraft()], encoder, tmp_path, on_row=stop_after_three)
    (rows_file,) = tmp_path.glob("ngram-*/rows.jsonl")
    with open(rows_file, "ab") as fh:
        fh.write(b'{"id": "cut sh')  # a line cut short by a kill
    report = score(run, [NgramDraft()], encoder, tmp_path)
    draft = report["drafts"][0]
    assert draft["scored_now"] == ROWS - 3
    ids = [r["id"] for r in read_rows(rows_file)]
    assert len(ids) == len(set(ids)) == ROWS
    assert draft["groups"]["(overall)"]["rows"] == ROWS


def test_sampling_is_stratified_and_seeded(run, encoder, tmp_path):
    picked = []
    for seed in (0, 0, 1):
        out = tmp_path / f"s{len(picked)}"
        report = score(run, [NgramDraft()], encoder, out, settings=settings(1, seed, "source"))
        groups = report["drafts"][0]["groups"]
        assert {g: v["rows"] for g, v in groups.items()} == {
            "src-chat": 1,
            "src-code": 1,
            "src-math": 1,
            "(overall)": 3,
        }
        picked.append({r["id"] for r in read_rows(Path(report["drafts"][0]["rows_file"]))})
    assert picked[0] == picked[1] and picked[0] != picked[2]


def test_cli_json_baseline_and_bad_input(run, requantized, tmp_path):
    runner = CliRunner()
    first = runner.invoke(
        main,
        [
            "score",
            str(run),
            "--draft",
            "ngram",
            "--ngram-lookup",
            "1-3",
            "--tokenizer",
            "embedded",
            "--k",
            "3",
            "--json",
        ],
    )
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["k"] == [3]
    before = tmp_path / "before.json"
    before.write_text((run / "score" / "score.json").read_text())
    second = runner.invoke(
        main,
        [
            "score",
            str(run),
            "--draft",
            str(requantized.path),
            "--tokenizer",
            "embedded",
            "--k",
            "3",
            "--baseline",
            str(before),
        ],
    )
    assert second.exit_code == 0, second.output
    assert "on the same rows" in second.output
    report = json.loads((run / "score" / "score.json").read_text())
    paired = report["drafts"][0]["baseline"]["groups"]["(overall)"]["3"]
    assert paired["rows"] == ROWS and paired["difference"] > 0
    # the second score adds its draft to the first's: ngram's results stay, as they were
    kept = report["drafts"][1]
    was = json.loads(before.read_text())["drafts"][0]
    assert [d["name"] for d in report["drafts"]] == [requantized.name, "ngram"]
    assert kept["earlier"] and kept["baseline"] is None and kept["groups"] == was["groups"]
    assert "draft ngram" in second.output and "scored by an earlier regen score" in second.output
    bad = runner.invoke(
        main, ["score", str(run), "--draft", "model.bin", "--tokenizer", "embedded"]
    )
    assert bad.exit_code == 2 and "not a .gguf file" in bad.output


def test_rows_are_the_same_scored_in_one_process_or_two_workers(
    run, requantized, encoder, tmp_path
):
    """A GGUF draft and the n-gram draft, each row scored in whichever worker: the rows file
    is the same bytes as one process's (each worker runs the draft with the same threads)."""
    from regen.executors.pool import LocalWorkers
    from regen.score import spread

    files = []
    # "few": too few rows to start processes for: scored here, the draft opened (and closed)
    # here as in a worker
    few = LocalWorkers(2, small=10**6)
    for name, workers in (("one", None), ("two", LocalWorkers(2, small=1)), ("few", few)):
        report = score(run, [requantized, NgramDraft()], encoder, tmp_path / name, workers=workers)
        files.append([Path(d["rows_file"]).read_bytes() for d in report["drafts"]])
        assert [d["groups"]["(overall)"]["rows"] for d in report["drafts"]] == [ROWS, ROWS]
        assert not spread._opened  # nothing left open in this process
    assert files[0] == files[1] == files[2]


def test_logprobs_that_do_not_line_up_skip_a_row_only_for_a_draft_that_reads_them(
    run, encoder, identity
):
    """A re-tokenised answer with a logprob count of its own (the engine split it otherwise):
    a GGUF draft, which samples against those logprobs, cannot score it; the n-gram draft
    reads none and scores it on its tokens."""
    from regen.finished.record import Completion
    from regen.score.spread import row_or_skip
    from regen.score.tokens import TokenRow

    record = json.loads((run / "completions" / "00000.jsonl").open().readline())
    record.pop("token_ids")
    record["logprobs"] = [-0.5]  # one logprob for a longer answer
    record["meta"] = {"sampling": {"temperature": 1.0}}
    row = row_or_skip(Completion(record), encoder, NgramDraft())
    assert isinstance(row, TokenRow) and row.logprobs is None and row.drawn.temperature == 1.0
    skipped = row_or_skip(Completion(record), encoder, identity)
    assert skipped["skipped"] == "logprobs_mismatch", skipped
