"""`regen plan`: a stratified calibration sample through generate's own run, an estimate of
the whole file with a bootstrap range, the slow server named, calibration answers kept as the
run's first records, a concurrency sweep, and --from-run using status's estimator."""

from __future__ import annotations

import zlib
from collections import Counter

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import assert_exactly_once, quick_config, write_prompts
from regen.cli import main
from regen.cli.status import render
from regen.plan.calibrate import Pricing, plan
from regen.plan.estimate import estimate, overhead_factor, schedule
from regen.plan.from_run import from_run
from regen.plan.measure import LatencyModel, Observation
from regen.plan.render import plan_lines
from regen.plan.sample import draw_sample
from regen.plan.sweep import sweep
from regen.run.config import Sampling
from regen.run.generate import generate
from regen.run.status import read_status
from regen.serve.fleetfile import FleetFile, FleetServer


def mixed_lengths(body: dict) -> dict:
    """A wide, deterministic answer-length mix: 20 to ~400 tokens by a hash of the prompt."""
    text = body["messages"][-1]["content"]
    return {"content": f"answer to: {text}", "tokens": 20 + zlib.crc32(text.encode()) % 380}


def write_sourced_prompts(path, sizes: dict[str, int]) -> None:
    with open(path, "wb") as fh:
        for source, count in sizes.items():
            for i in range(count):
                content = f"{source} question {i} " + "x" * (10 if i % 2 else 2000)
                record = {
                    "id": f"{source}-{i}",
                    "source": {"dataset": source},
                    "messages": [{"role": "user", "content": content}],
                }
                fh.write(orjson.dumps(record) + b"\n")


def test_the_sample_is_stratified_seeded_and_weighted(tmp_path):
    write_sourced_prompts(tmp_path / "p.jsonl", {"big": 600, "mid": 300, "small": 100})
    sample = draw_sample(tmp_path / "p.jsonl", 50, seed=1)
    assert sample.prompts == 1000 and sample.size == 50
    by_source = Counter(sample.stratum_of[line][0] for line in sample.lines)
    expected = {"big": 30, "mid": 15, "small": 5}  # in proportion, up to rounding per stratum
    assert all(abs(by_source[name] - n) <= 1 for name, n in expected.items()), by_source
    by_length = Counter(sample.stratum_of[line][2] for line in sample.lines)
    assert len(by_length) == 2 and max(by_length.values()) - min(by_length.values()) <= 2
    assert sum(sample.lines.values()) == pytest.approx(1000)
    assert draw_sample(tmp_path / "p.jsonl", 50, seed=1).lines == sample.lines
    assert draw_sample(tmp_path / "p.jsonl", 50, seed=2).lines != sample.lines


def test_plan_estimates_names_the_slow_server_and_ranges_the_estimate(tmp_path, fake_server):
    fast = fake_server(seconds_per_token=0.0005, answer=mixed_lengths)
    slow = fake_server(seconds_per_token=0.003, answer=mixed_lengths)
    write_prompts(tmp_path / "p.jsonl", 300)
    config = quick_config(tmp_path / "p.jsonl", tmp_path / "unused", [fast.url, slow.url])
    report = plan(config, sample_size=40, pricing=Pricing(2.0, 4))
    assert report.slower_servers == [slow.url]
    est = report.estimate
    assert est.items == 300 and report.prompts == 300
    assert est.wall_seconds_p10 <= est.wall_seconds <= est.wall_seconds_p90
    assert 20 <= report.answers["mean"] <= 400
    assert report.cost_usd == pytest.approx(est.wall_seconds / 3600 * 2.0 * 4 * 2)
    assert len(fast.requests) + len(slow.requests) == 40  # the sample only, nothing kept
    assert not (tmp_path / "unused").exists()


def test_answers_cut_at_max_tokens_are_counted(tmp_path, fake_server):
    server = fake_server(answer=mixed_lengths)
    write_prompts(tmp_path / "p.jsonl", 60)
    config = quick_config(
        tmp_path / "p.jsonl", tmp_path / "o", [server.url], sampling=Sampling(max_tokens=100)
    )
    report = plan(config, sample_size=60)
    lengths = [mixed_lengths(b)["tokens"] for b in server.requests]
    assert report.answers["hit_max_tokens_share"] == pytest.approx(
        sum(t > 100 for t in lengths) / 60, abs=1e-3
    )
    assert report.answers["max"] == 100


def test_kept_calibration_answers_are_not_redone_by_generate(tmp_path, fake_server):
    server = fake_server(answer=mixed_lengths)
    ids = write_prompts(tmp_path / "p.jsonl", 50)
    config = quick_config(tmp_path / "p.jsonl", tmp_path / "run", [server.url])
    report = plan(config, sample_size=12, keep=True)
    assert report.remaining == {
        "items": 38,
        "wall_seconds": pytest.approx(report.remaining["wall_seconds"]),
    }
    assert read_status(tmp_path / "run")["progress"]["state"] == "calibrated"
    sampled = {b["messages"][0]["content"] for b in server.requests}
    assert len(sampled) == 12
    result = generate(config)
    assert result.exit_code == 0 and result.stats.completed == 38
    later = {b["messages"][0]["content"] for b in server.requests[12:]}
    assert len(server.requests) == 50 and not later & sampled
    assert_exactly_once(tmp_path / "run", ids)


def test_from_run_gives_the_eta_that_status_shows(tmp_path, fake_server):
    server = fake_server(answer=mixed_lengths, seconds_per_token=0.0002)
    write_prompts(tmp_path / "p.jsonl", 40)
    config = quick_config(tmp_path / "p.jsonl", tmp_path / "run", [server.url])
    plan(config, sample_size=10, keep=True)
    status = read_status(tmp_path / "run")
    estimate = from_run(tmp_path / "run", Pricing(3.0, 2))
    assert estimate["remaining"] == status["eta"]["items"] == 30
    assert estimate["wall_seconds"] == status["eta"]["seconds"] > 0
    assert estimate["cost_usd"] == pytest.approx(estimate["wall_seconds"] / 3600 * 3.0 * 2)
    text = "\n".join(render(status))
    assert "NOT STARTED" in text and "for 30 items left" in text


def test_sweep_recommends_the_knee(tmp_path, fake_server):
    # The server batches 4 requests; a client sending 8 only queues there: no more throughput.
    # Each answer takes 0.8 s so that the client's own time around a request (outside the
    # server's slot, which 8 in flight would overlap) stays far below the knee's 10% band.
    server = fake_server(
        slots=4, seconds_per_token=0.016, answer=lambda body: {**mixed_lengths(body), "tokens": 50}
    )
    write_prompts(tmp_path / "p.jsonl", 40)
    config = quick_config(tmp_path / "p.jsonl", tmp_path / "o", [server.url])
    result = sweep(config, [2, 4, 8])
    assert [level.concurrency for level in result.levels] == [2, 4, 8]
    assert result.recommended == result.knee == 4, result  # 8 brings no more output
    latency = {level.concurrency: level.latency_mean_s for level in result.levels}
    assert latency[8] > latency[4]


def test_cli_json_has_the_promised_keys(tmp_path, fake_server):
    server = fake_server(answer=mixed_lengths, seconds_per_token=0.002)
    write_prompts(tmp_path / "p.jsonl", 30)
    result = CliRunner().invoke(
        main,
        [
            "plan",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "--servers",
            server.url,
            "--sample",
            "10",
            "--concurrency",
            "4",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.output)
    assert data["prompts"] == 30 and data["cost_usd"] is None
    for key in ("wall_seconds", "wall_seconds_p10", "wall_seconds_p90", "completions_per_second"):
        assert isinstance(data[key], float) and data[key] > 0
    assert isinstance(data["output_tokens"], int)
    (figures,) = data["servers"]
    assert figures["url"] == server.url and figures["completions"] == 10


def test_cli_without_prompts_says_what_to_give(tmp_path):
    result = CliRunner().invoke(main, ["plan", "--servers", "http://127.0.0.1:1"])
    assert result.exit_code == 2
    assert "--prompts FILE" in result.output


def test_the_simulation_dispatches_like_the_fleet_and_scales_by_the_overhead():
    # One server three times slower; each freed slot takes the next item at once.
    models = {"fast": LatencyModel(0.0, 0.01), "slow": LatencyModel(0.0, 0.03)}
    assert schedule([100] * 8, models, 1) == pytest.approx(6.0)  # fast does 6, slow does 2
    observations = [Observation(100, 1.0, "fast", False, 1.0, line=n) for n in range(4)]
    assert overhead_factor(observations, 2, measured_seconds=4.0) == pytest.approx(2.0)
    plain = estimate(40, observations, 2)
    slowed = estimate(40, observations, 2, overhead=2.0)
    assert plain.wall_seconds == pytest.approx(20.0)
    assert slowed.wall_seconds == pytest.approx(40.0) and slowed.wall_seconds_p90 == 40.0


def test_cli_plans_on_the_servers_of_a_fleet_file(tmp_path, fake_server):
    a, b = fake_server(answer=mixed_lengths), fake_server(answer=mixed_lengths)
    fleet = FleetFile(
        "fake",
        "fake-model",
        "fake-model",
        [
            FleetServer(f"server-{n}", s.url, s.port, None, "log", ["fake"])
            for n, s in enumerate((a, b))
        ],
    )
    fleet.write(tmp_path / "fleet.json")
    write_prompts(tmp_path / "p.jsonl", 20)
    result = CliRunner().invoke(
        main,
        [
            "plan",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "--fleet",
            str(tmp_path / "fleet.json"),
            "--sample",
            "12",
            "--concurrency-per-server",
            "2",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert {s["url"] for s in orjson.loads(result.output)["servers"]} == {a.url, b.url}


def test_answers_faster_than_a_millisecond_still_give_an_estimate():
    # Records keep latency to the millisecond, so a very fast server reads as 0.000 s.
    observations = [Observation(8, 0.0, "instant", False, 1.0, line=n) for n in range(5)]
    result = estimate(100, observations, 4)
    assert result.wall_seconds > 0 and result.completions_per_second > 0


def test_a_server_that_queues_gets_the_figures_it_showed_and_they_add_up_to_the_fleet(
    tmp_path, fake_server
):
    """A server that answers one request at a time (llama.cpp's), planned with far more
    slots than the sample fills: each answer's latency is mostly waiting for the others, so
    16 slots / that latency is no rate it can do. The figures hold the load the calibration
    measured, and the server's line is its part of the fleet's."""
    server = fake_server(
        slots=1, seconds_per_token=0.002, answer=lambda body: {**mixed_lengths(body), "tokens": 40}
    )
    write_prompts(tmp_path / "p.jsonl", 60)
    config = quick_config(tmp_path / "p.jsonl", tmp_path / "o", [server.url], concurrency=16)
    data = plan(config, sample_size=6).to_json()
    (figures,) = data["servers"]
    cal = data["calibration"]
    measured = cal["completions"] / cal["dispatch_seconds"]  # what the server really did
    assert figures["completions_per_second"] == pytest.approx(
        data["completions_per_second"], rel=0.01
    )
    assert figures["completions_per_second"] < 2 * measured, (figures, measured)
    assert figures["slots"] < figures["concurrency"] == 16
    text = "\n".join(plan_lines(data, "p.jsonl"))
    assert f"the calibration kept {figures['slots']} on {server.url}" in text


def test_from_run_on_a_finished_run_says_nothing_is_left(tmp_path, fake_server):
    server = fake_server(answer=mixed_lengths, seconds_per_token=0.0002)
    write_prompts(tmp_path / "p.jsonl", 6)
    generate(quick_config(tmp_path / "p.jsonl", tmp_path / "run", [server.url]))
    result = CliRunner().invoke(
        main, ["plan", "--from-run", str(tmp_path / "run"), "--gpu-hour-cost", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "time left    none: every item is finished" in result.output
    assert "?" not in result.output and "cost left    $0.00" in result.output


def test_sweep_recommends_the_most_output_and_names_the_latency_trade_off():
    from regen.plan.render import sweep_lines
    from regen.plan.sweep import Level, SweepResult, recommend

    levels = [
        Level(2, 10, 100.0, 1.0),
        Level(4, 10, 220.0, 1.1),
        Level(8, 10, 232.0, 1.9),
        Level(16, 10, 240.0, 3.8),
        Level(32, 10, 400.0, 9.0, failed=3),
    ]
    most, knee = recommend(levels)
    assert (most, knee) == (8, 4)  # 16 is within noise of 8; 32's answers failed
    text = "\n".join(sweep_lines(SweepResult(levels, most, knee).to_json()))
    assert "recommended: --concurrency-per-server 8 (the most output)" in text
    assert "trade-off: 4 answers each request in 1.1s instead of 1.9s for 5% less output" in text


def test_status_after_a_calibration_in_a_half_done_run_says_paused_or_finished(
    tmp_path, fake_server
):
    """`plan --output-dir` on a run generate had started: not "NOT STARTED" (it had), and a
    sample that took every item left is a finished run."""
    from dataclasses import replace

    server = fake_server(answer=mixed_lengths, seconds_per_token=0.0002)
    write_prompts(tmp_path / "p.jsonl", 40)
    config = quick_config(tmp_path / "p.jsonl", tmp_path / "run", [server.url])
    trial = replace(config, input=replace(config.input, limit=5))
    assert generate(trial).exit_code == 0
    plan(config, sample_size=10, keep=True)
    head = render(read_status(tmp_path / "run"))[0]
    assert "PAUSED (regen plan's calibration sample is in" in head, head
    plan(config, sample_size=40, keep=True)  # the whole file: what is left is taken
    status = read_status(tmp_path / "run")
    assert status["count"]["left"] == 0
    assert "FINISHED (regen plan's calibration sample answered" in render(status)[0]
