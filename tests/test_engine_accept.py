"""The serving drafter's acceptance: generate keeps vLLM's per-request
`metrics.speculative_decoding`, status and /metrics show it per server, and
`score --from-engine` tabulates it per group (against the fake's vLLM dialect; the real
engine is in test_engine_accept_vllm.py)."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import read_lines, run, write_prompts
from regen.cli import main
from regen.fleet.server import Timeouts
from regen.metrics import SnapshotCollector
from regen.score.engine import row_steps
from regen.score.replay import PROBE_TOKENS
from regen.serve.spec_metrics import with_spec_metrics
from regen.testing.fake_spec import spec_decoding

STREAM = Timeouts(request=30, connect=2, stall=5, stream=True)


def categorised(path, n: int) -> list[str]:
    """n prompts, alternately `code` and `chat`, answered by the fake in different lengths."""
    ids = []
    with open(path, "wb") as fh:
        for i in range(n):
            ids.append(f"q{i}")
            line = {
                "id": f"q{i}",
                "messages": [{"role": "user", "content": "w " * (3 + 5 * i)}],
                "meta": {"category": "code" if i % 2 else "chat"},
            }
            fh.write(orjson.dumps(line) + b"\n")
    return ids


def long_answer(body):
    words = body["messages"][-1]["content"].split()
    return {"content": " ".join(words), "tokens": 4 * len(words)}


@pytest.mark.parametrize("timeouts", [None, STREAM], ids=["plain", "streamed"])
def test_each_answer_keeps_the_engines_acceptance(tmp_path, fake_server, timeouts):
    server = fake_server(dialect="vllm", spec_tokens=3, answer=long_answer)
    categorised(tmp_path / "p.jsonl", 4)
    extra = {"timeouts": timeouts} if timeouts else {}
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], **extra)
    records = read_lines(tmp_path / "out", "completions")
    assert len(records) == 4
    for record in records:
        tokens = record["usage"]["completion_tokens"]
        assert record["meta"]["speculative_decoding"] == spec_decoding(tokens, 3)


def test_a_conversation_regenerated_turn_by_turn_counts_every_turns_steps(tmp_path, fake_server):
    server = fake_server(dialect="vllm", spec_tokens=3, answer=long_answer)
    turns = [
        {"role": "user", "content": "w " * 6},
        {"role": "assistant", "content": "old"},
        {"role": "user", "content": "w " * 11},
    ]
    (tmp_path / "p.jsonl").write_bytes(orjson.dumps({"id": "c", "messages": turns}) + b"\n")
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], regenerate_turns="all")
    (record,) = read_lines(tmp_path / "out", "completions")
    per_turn = [t["speculative_decoding"] for t in record["meta"]["turns"]]
    assert per_turn == [
        spec_decoding(t["usage"]["completion_tokens"], 3) for t in record["meta"]["turns"]
    ]
    both = record["meta"]["speculative_decoding"]
    for name in ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens"):
        assert both[name] == per_turn[0][name] + per_turn[1][name] > per_turn[1][name]
    assert (
        both["per_step_accepted"]
        == per_turn[0]["per_step_accepted"] + per_turn[1]["per_step_accepted"]
    )
    assert (
        both["mean_acceptance_length"]
        == 1 + both["num_accepted_draft_tokens"] / both["num_spec_steps"]
    )
    assert both["acceptance_histogram"] == [
        a + b for a, b in zip(*(t["acceptance_histogram"] for t in per_turn), strict=True)
    ]


def test_nothing_is_kept_without_speculation(tmp_path, fake_server):
    server = fake_server(dialect="vllm")  # vLLM answers "metrics": null
    write_prompts(tmp_path / "p.jsonl", 3)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    records = read_lines(tmp_path / "out", "completions")
    assert records and all("speculative_decoding" not in r["meta"] for r in records)
    result = CliRunner().invoke(main, ["score", str(tmp_path / "out"), "--from-engine"])
    assert result.exit_code == 2
    assert "--per-request-spec-decode-metrics" in result.output


def test_from_engine_pools_the_steps_per_group_as_vllm_counts(tmp_path, fake_server):
    server = fake_server(dialect="vllm", spec_tokens=3, answer=long_answer)
    categorised(tmp_path / "p.jsonl", 6)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    result = CliRunner().invoke(
        main, ["score", str(tmp_path / "out"), "--from-engine", "--all", "--json"]
    )
    assert result.exit_code == 0, result.output
    draft = orjson.loads(result.output)["drafts"][0]
    records = read_lines(tmp_path / "out", "completions")
    for group in ("chat", "code", "(overall)"):
        mine = [
            r["meta"]["speculative_decoding"]
            for r in records
            if group == "(overall)" or r["category"] == group
        ]
        steps = sum(s["num_spec_steps"] for s in mine)
        accepted = sum(s["num_accepted_draft_tokens"] for s in mine)
        at3 = draft["groups"][group]["by_k"][0]
        assert at3["k"] == 3 and at3["verify_steps"] == steps
        assert at3["tau"]["value"] == round(1 + accepted / steps, 4)
        assert at3["acceptance_rate"]["value"] == round(accepted / (3 * steps), 4)
        counters = draft["engine_counters"][group]
        assert (counters["num_drafts"], counters["num_accepted_tokens"]) == (steps, accepted)
        # a step that accepted j drafts counts at positions 0..j-1, as vLLM's per_pos counter
        runs = at3["accepted_runs"]
        assert counters.get("accepted_at_2", 0) == runs[3]
        assert counters["accepted_at_0"] == sum(runs[1:])
    assert (tmp_path / "out/score/engine/score.json").is_file()
    assert not (tmp_path / "out/score/score.json").exists()  # a draft's score stays its own


def test_status_and_metrics_show_each_servers_acceptance_length(tmp_path, fake_server):
    server = fake_server(dialect="vllm", spec_tokens=3, answer=long_answer)
    categorised(tmp_path / "p.jsonl", 3)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    records = read_lines(tmp_path / "out", "completions")
    steps = sum(r["meta"]["speculative_decoding"]["num_spec_steps"] for r in records)
    accepted = sum(r["meta"]["speculative_decoding"]["num_accepted_draft_tokens"] for r in records)
    result = CliRunner().invoke(main, ["status", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert f"drafter acceptance length {1 + accepted / steps:.2f} over {steps} verify steps" in (
        result.output
    )
    collector = SnapshotCollector()
    collector.snap = orjson.loads((tmp_path / "out/progress.json").read_bytes())
    found = {m.name: m.samples[0].value for m in collector.collect() if m.samples}
    assert found["regen_server_spec_verify_steps"] == steps
    length = found["regen_server_spec_acceptance_length"]
    assert length == pytest.approx(1 + accepted / steps, abs=1e-4)


def test_summary_level_metrics_have_no_per_step_arrays():
    detailed = spec_decoding(20, 3)
    summary = {k: v for k, v in detailed.items() if not k.startswith("per_step")}
    for spec in (detailed, summary):
        row = row_steps(spec)
        assert (row.steps, row.accepted) == (
            spec["num_spec_steps"],
            spec["num_accepted_draft_tokens"],
        )
        assert row.tau == spec["mean_acceptance_length"]
    # an n-gram drafter can draft fewer than k: those steps draft fewer positions
    short = {**detailed, "per_step_drafted": [3, 1, 3, 2, 3, 3, 3][: detailed["num_spec_steps"]]}
    assert row_steps(short).short == tuple(d for d in short["per_step_drafted"] if d < 3)


def test_replay_sends_the_prompts_greedy_to_a_speculating_fleet(tmp_path, fake_server):
    plain = fake_server(answer=long_answer)  # the run's own fleet reports nothing
    categorised(tmp_path / "p.jsonl", 4)
    run(tmp_path / "p.jsonl", tmp_path / "out", [plain.url])
    original = {r["id"]: r for r in read_lines(tmp_path / "out", "completions")}
    fleet = fake_server(dialect="vllm", spec_tokens=3, answer=long_answer)
    args = ["score", str(tmp_path / "out"), "--replay-servers", fleet.url, "--all", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert len(fleet.requests) == 1 + 4  # a short probe, then the four prompts
    assert fleet.requests[0]["max_tokens"] == PROBE_TOKENS
    for body in fleet.requests:
        assert body["temperature"] == 0.0
        assert body["messages"][-1]["role"] == "user"  # the prompt, not its old answer
    lengths = sorted(r["usage"]["completion_tokens"] for r in original.values())
    assert sorted(body["max_tokens"] for body in fleet.requests[1:]) == lengths
    draft = orjson.loads(result.output)["drafts"][0]
    assert set(draft["groups"]) == {"chat", "code", "(overall)"}
    replayed = read_lines(tmp_path / "out/score/replay/run", "completions")
    steps = sum(r["meta"]["speculative_decoding"]["num_spec_steps"] for r in replayed)
    assert draft["groups"]["(overall)"]["by_k"][0]["verify_steps"] == steps
    again = CliRunner().invoke(main, args)  # a second call goes on from the replayed answers
    assert again.exit_code == 0 and len(fleet.requests) == 5  # (and needs no probe)


def test_replay_refuses_a_server_that_does_not_speculate_after_one_short_request(
    tmp_path, fake_server
):
    categorised(tmp_path / "p.jsonl", 4)
    spec = fake_server(dialect="vllm", spec_tokens=3, answer=long_answer)
    run(tmp_path / "p.jsonl", tmp_path / "out", [spec.url])
    plain = fake_server(dialect="vllm", answer=long_answer)  # serves with no drafter
    args = ["score", str(tmp_path / "out"), "--replay-servers", spec.url, plain.url, "--all"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert f"{plain.url} answered without speculative-decoding metrics" in result.output
    assert "--speculative-config" in result.output and "Traceback" not in result.output
    assert [b["max_tokens"] for b in plain.requests] == [PROBE_TOKENS]  # nothing else sent
    assert len(spec.requests) == 4 + 1  # the run, then its own probe
    assert not (tmp_path / "out/score/replay/run").exists()
    probes = tmp_path / "out/score/replay/probe"  # each server's answer, kept to look at
    assert [len(read_lines(probes / n / "run", "completions")) for n in ("0", "1")] == [1, 1]


@pytest.mark.parametrize(("version", "added"), [("0.32.0", True), ("0.31.2", False)])
def test_serve_asks_a_speculating_vllm_for_its_per_request_metrics(tmp_path, version, added):
    python = tmp_path / "python"  # answers the version probe as that vLLM's Python would
    python.write_text(f"#!/bin/sh\necho {version}\n")
    python.chmod(0o755)
    spec = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}']
    flag = ["--per-request-spec-decode-metrics", "detailed"]
    processed = ["--logprobs-mode", "processed_logprobs"]  # logprobs of the drawn distribution
    # ... but not where it speculates: the CPU build's rejection sampler goes NaN in that mode
    assert with_spec_metrics("vllm", str(python), spec) == (spec + flag if added else spec)
    chosen = [*spec, "--per-request-spec-decode-metrics=summary", "--logprobs-mode=raw_logits"]
    assert with_spec_metrics("vllm", str(python), chosen) == chosen  # the user's choices stay
    assert with_spec_metrics("vllm", str(python), ["--max-num-seqs", "8"]) == [
        "--max-num-seqs",
        "8",
        *processed,
    ]
    assert with_spec_metrics("sglang", str(python), spec) == spec


def test_the_live_view_has_an_acceptance_column_only_for_a_speculating_fleet():
    from rich.console import Console

    from regen.display import server_table

    plain = {
        "url": "http://127.0.0.1:8000",
        "state": "healthy",
        "in_flight": 1,
        "completed": 3,
        "failed": 0,
        "latency_ewma_s": 0.5,
        "completion_tokens": 99,
        "last_error": None,
    }
    spec = {**plain, "spec_steps": 10, "spec_accepted_tokens": 13, "acceptance_length": 2.3}
    for servers, shown in (([spec, plain], True), ([plain], False)):
        console = Console(width=140, record=True)
        console.print(server_table(servers))
        text = console.export_text()
        assert ("accept len" in text) is shown
        assert ("2.30" in text) is shown
