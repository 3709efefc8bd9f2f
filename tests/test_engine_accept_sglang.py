"""SGLang fleets: generate asks a speculating SGLang for its per-request counts and keeps them
in vLLM's `meta.speculative_decoding` shape, and `score --from-engine` / `--replay-servers`
tabulate them (against the fake's SGLang dialect, whose fields follow SGLang 0.5.23's source:
see regen/fleet/sglang_spec.py)."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import read_lines, run
from regen.cli import main
from regen.fleet.server import Timeouts
from regen.fleet.sglang_spec import spec_from_sglext
from regen.testing.fake_spec import sglang_details, spec_decoding
from test_engine_accept import categorised, long_answer

STREAM = Timeouts(request=30, connect=2, stall=5, stream=True)
COUNTS = (
    "num_spec_steps",
    "num_accepted_draft_tokens",
    "num_draft_tokens",
    "num_spec_tokens",
    "acceptance_histogram",
    "mean_acceptance_length",
    "draft_acceptance_rate",
)


@pytest.mark.parametrize("timeouts", [None, STREAM], ids=["plain", "streamed"])
def test_each_answer_keeps_sglangs_counts_in_vllms_shape(tmp_path, fake_server, timeouts):
    server = fake_server(dialect="sglang", spec_tokens=3, answer=long_answer)
    categorised(tmp_path / "p.jsonl", 4)
    extra = {"timeouts": timeouts} if timeouts else {}
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], **extra)
    assert all(body["return_spec_tokens_details"] is True for body in server.requests)
    records = read_lines(tmp_path / "out", "completions")
    assert len(records) == 4
    for record in records:
        tokens = record["usage"]["completion_tokens"]
        spec = record["meta"]["speculative_decoding"]
        vllm = spec_decoding(tokens, 3)  # what vLLM reports for the same verify steps
        assert {k: spec[k] for k in COUNTS} == {k: vllm[k] for k in COUNTS}
        assert spec["engine"] == "sglang"
        assert spec["spec_accept_length"] == sglang_details(tokens, 3)["spec_accept_length"]


def test_other_engines_are_not_sent_sglangs_field(tmp_path, fake_server):
    server = fake_server(dialect="vllm", spec_tokens=3, answer=long_answer)
    categorised(tmp_path / "p.jsonl", 2)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    assert server.requests and all("return_spec_tokens_details" not in b for b in server.requests)


def test_an_sglang_server_that_does_not_speculate_leaves_no_counts(tmp_path, fake_server):
    server = fake_server(dialect="sglang", answer=long_answer)
    categorised(tmp_path / "p.jsonl", 2)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    records = read_lines(tmp_path / "out", "completions")
    assert records and all("speculative_decoding" not in r["meta"] for r in records)


def test_from_engine_and_replay_tabulate_an_sglang_fleet(tmp_path, fake_server):
    fleet = fake_server(dialect="sglang", spec_tokens=3, answer=long_answer)
    categorised(tmp_path / "p.jsonl", 6)
    run(tmp_path / "p.jsonl", tmp_path / "out", [fleet.url])
    records = read_lines(tmp_path / "out", "completions")
    result = CliRunner().invoke(
        main, ["score", str(tmp_path / "out"), "--from-engine", "--all", "--json"]
    )
    assert result.exit_code == 0, result.output
    groups = orjson.loads(result.output)["drafts"][0]["groups"]
    for group in ("chat", "code"):
        mine = [r["meta"]["speculative_decoding"] for r in records if r["category"] == group]
        steps = sum(s["num_spec_steps"] for s in mine)
        accepted = sum(s["num_accepted_draft_tokens"] for s in mine)
        at3 = groups[group]["by_k"][0]
        assert (at3["k"], at3["verify_steps"]) == (3, steps)
        assert at3["tau"]["value"] == round(1 + accepted / steps, 4)
    replay = ["score", str(tmp_path / "out"), "--replay-servers", fleet.url, "--all", "--json"]
    replayed = CliRunner().invoke(main, replay)
    assert replayed.exit_code == 0, replayed.output
    assert len(fleet.requests) == 13  # the run's 6, a probe, the replay's 6
    assert all(b["temperature"] == 0.0 for b in fleet.requests[6:])
    overall = orjson.loads(replayed.output)["drafts"][0]["groups"]["(overall)"]["by_k"][0]
    answers = read_lines(tmp_path / "out/score/replay/run", "completions")
    assert overall["verify_steps"] == sum(
        r["meta"]["speculative_decoding"]["num_spec_steps"] for r in answers
    )


def test_the_sglext_shapes_sglang_can_send():
    details = sglang_details(40, 4)
    one = spec_from_sglext({"sglext": {"spec_tokens_details": details}})
    assert one is not None and one["num_spec_tokens"] == 4
    assert len(one["acceptance_histogram"]) == 5  # padded to k + 1
    assert sum(one["acceptance_histogram"]) == details["spec_verify_ct"]
    # n > 1: a list, one per choice (regen sends one request a sample: the first is its)
    assert spec_from_sglext({"sglext": {"spec_tokens_details": [details, details]}}) == one
    assert spec_from_sglext({"sglext": {"cached_tokens_details": {"device": 3}}}) is None
    assert spec_from_sglext({"choices": []}) is None
    no_steps = {**details, "spec_verify_ct": 0, "spec_num_proposed_drafts": 0}
    assert spec_from_sglext({"sglext": {"spec_tokens_details": no_steps}}) is None
