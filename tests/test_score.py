"""`regen score` on the embedded SmolLM2: the identity draft, a requantized draft, the n-gram
baseline, re-tokenised runs, resume, sampling and the command line. One model of each kind is
loaded per module (CPU is scarce); answers are the model's own greedy decoding."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from regen.check import Encoder
from regen.cli import main
from regen.embedded_model import default_model_path
from regen.finished.score_rows import read_rows
from regen.score import ScoreSettings, score_run
from regen.score.llama_draft import LlamaDraft
from regen.score.ngram import NgramDraft, NgramSettings
from regen.score.rows import Selection

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from score_helpers import PROMPTS, requantize

pytestmark = pytest.mark.model
ROWS = sum(len(p) for p in PROMPTS.values())


@pytest.fixture(scope="module")
def identity() -> LlamaDraft:
    draft = LlamaDraft(default_model_path(), n_ctx=512)
    yield draft
    draft.close()


@pytest.fixture(scope="module")
def requantized(tmp_path_factory) -> LlamaDraft:
    path = requantize(default_model_path(), tmp_path_factory.mktemp("draft") / "smol-q2k.gguf")
    draft = LlamaDraft(path, n_ctx=512)
    yield draft
    draft.close()


def settings(per_group: int | None = None, seed: int = 0, by: str = "category") -> ScoreSettings:
    return ScoreSettings(Selection(by, per_group, seed), list(range(1, 9)), "embedded")


def score(run: Path, drafts, encoder, out: Path | None = None, **kw):
    """Into RUN/score by default, as the CLI does: a draft scored by an earlier test is
    resumed there, not scored again (each model pass costs seconds of scarce CPU)."""
    out = out or run / "score"
    return score_run(run, drafts, encoder, kw.pop("settings", settings()), out, **kw).to_json()


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


@pytest.mark.parametrize("api", ["vllm", "sglang"])
def test_fleet_path_gives_the_local_per_row_results(
    run, requantized, encoder, tmp_path, api, monkeypatch
):
    """A draft fleet started with an API key (vLLM's and SGLang's --api-key) is asked with
    it, as generate's fleet is."""
    from regen.score.fleet_draft import FleetDraft
    from regen.testing.logprob_server import LogprobServer

    local = score(run, [requantized], encoder)["drafts"][0]  # resumed from RUN/score
    with LogprobServer(requantized.path, n_ctx=512, api_key="draft-key") as server:
        draft = FleetDraft([server.url], api, api_key="draft-key")
        served = score(run, [draft], encoder, tmp_path)["drafts"][0]
        asked = set(server.requests)
        if api == "sglang":  # and once through the command line, as a user runs it
            args = [
                "score",
                str(run),
                "--draft-servers",
                server.url,
                "--draft-api",
                api,
                "--tokenizer",
                "embedded",
                "--k",
                "3",
                "--json",
            ]
            monkeypatch.delenv("OPENAI_API_KEY", raising=False)
            refused = CliRunner().invoke(main, args)
            assert refused.exit_code != 0 and "API key" in refused.output, refused.output
            assert "Traceback" not in refused.output
            monkeypatch.setenv("DRAFT_KEY", "draft-key")
            cli = CliRunner().invoke(main, [*args, "--api-key-env", "DRAFT_KEY"])
            assert cli.exit_code == 0, cli.output
            by_cli = json.loads(cli.output)["drafts"][0]["groups"]["(overall)"]
            assert by_cli["rows"] == ROWS and by_cli["by_k"][0]["k"] == 3
    assert asked == {"/v1/completions" if api == "vllm" else "/generate"}
    by_id = {r["id"]: r["match"] for r in read_rows(Path(local["rows_file"]))}
    rows = list(read_rows(Path(served["rows_file"])))
    assert len(rows) == ROWS and all(by_id[r["id"]] == r["match"] for r in rows)
    assert "0" in "".join(by_id.values())  # the comparison covers misses, not only hits


def test_export_selects_and_orders_by_score(run, encoder, tmp_path):
    from regen.score import write_report

    report = score_run(run, [NgramDraft()], encoder, settings(), tmp_path / "score")
    score_json, _ = write_report(report, tmp_path / "score")
    rows = {r["id"]: r["acceptance"] for r in read_rows(report.drafts[0].rows_file)}
    cut = sorted(rows.values())[ROWS // 2]
    out = tmp_path / "export"
    result = CliRunner().invoke(
        main,
        [
            "export",
            str(run),
            "-o",
            str(out),
            "--format",  # a tokenised one: the answers hit the cap (see test_export_cut.py)
            "speculators",
            "--tokenizer",
            "embedded",
            "--score",
            str(score_json),
            "--max-acceptance",
            str(cut),
            "--order",
            "hard-first",
        ],
    )
    assert result.exit_code == 0, result.output
    files = sorted(out.glob("data/**/*.jsonl"))
    per_file = [[json.loads(line)["id"] for line in f.read_text().splitlines()] for f in files]
    ids = [i for file_ids in per_file for i in file_ids]
    assert set(ids) == {i for i, a in rows.items() if a <= cut}
    for file_ids in per_file:  # one file per domain, each hardest first
        assert [rows[i] for i in file_ids] == sorted(rows[i] for i in file_ids)
    dropped = ROWS - len(ids)
    assert dropped > 0 and f"dropped above acceptance {cut}" in result.output


def test_check_html_report_shows_the_acceptance_section(run, identity, encoder, tmp_path):
    from regen.score import write_report

    write_report(score_run(run, [identity], encoder, settings(), run / "score"), run / "score")
    html = tmp_path / "report.html"
    result = CliRunner().invoke(
        main, ["check", str(run), "--tokenizer", "embedded", "--html", str(html)]
    )
    assert result.exit_code in (0, 1), result.output  # the verdict does not matter here
    page = html.read_text()
    assert "Acceptance (regen score, k=8)" in page
    assert 'aria-label="tau(8) by category' in page and "Acceptance per draft position" in page
    for category in PROMPTS:
        assert f"{category} (2)" in page  # a bar per category, labelled with its rows


def test_a_served_draft_with_another_vocabulary_is_refused(run, tmp_path):
    from regen.errors import ConfigError
    from regen.score.fleet_draft import FleetDraft
    from regen.testing.logprob_server import LogprobServer

    other = Encoder.of(checkfix.load("qwen"))  # the target's tokens mean other text
    with (
        LogprobServer(default_model_path(), n_ctx=512) as server,
        pytest.raises(ConfigError, match="does not share the target's vocabulary"),
    ):
        score(run, [FleetDraft([server.url], "vllm")], other, tmp_path)
    # refused on the first answer, before any row was written
    assert not [r for f in tmp_path.glob("vllm-fleet-*/rows.jsonl") for r in read_rows(f)]


def test_rows_are_the_same_scored_in_one_process_or_two_workers(
    run, requantized, encoder, tmp_path
):
    """A GGUF draft and the n-gram draft, each row scored in whichever worker: the rows file
    is the same bytes as one process's (each worker runs the draft with the same threads)."""
    from regen.executors.pool import LocalWorkers

    files = []
    for name, workers in (("one", None), ("two", LocalWorkers(2, small=1))):
        report = score(run, [requantized, NgramDraft()], encoder, tmp_path / name, workers=workers)
        files.append([Path(d["rows_file"]).read_bytes() for d in report["drafts"]])
        assert [d["groups"]["(overall)"]["rows"] for d in report["drafts"]] == [ROWS, ROWS]
    assert files[0] == files[1]


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
