"""A flaky fleet: every scenario ends with each prompt completed exactly once (or recorded
in errors/ with a reason when the error is permanent)."""

from __future__ import annotations

import threading
import time

from gen_helpers import assert_exactly_once, run, write_prompts
from regen.fleet.dispatch import RetryPolicy
from regen.fleet.server import Timeouts
from regen.run.stop import StopReason
from regen.testing.fake_server import Behaviour, FakeServer, echo_answer
from waiting import wait_until


def slow(seconds_per_token: float, **fields) -> Behaviour:
    return Behaviour(seconds_per_token=seconds_per_token, **fields)


def test_500s_and_429_with_retry_after_are_retried(tmp_path, fake_server):
    server = fake_server(faults=["500", "ok", "ok", "429", "ok", "ok"], retry_after=0.3)
    ids = write_prompts(tmp_path / "p.jsonl", 40)
    started = time.monotonic()
    # A third of all requests fail; 10 retries make exhausting them vanishingly unlikely.
    retry = RetryPolicy(max_retries=10, base_delay=0.05, max_delay=0.3)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], retry=retry)
    assert result.exit_code == 0
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors
    assert max(r["meta"]["attempts"] for r in completions) >= 2
    assert result.stats.completed == 40
    # 429s asked for 0.3 s; with ~16 of them on one path at least one wait was honoured.
    assert time.monotonic() - started >= 0.3


def test_permanent_error_is_recorded_at_once_with_the_server_message(tmp_path, fake_server):
    server = fake_server(faults=["400"])
    ids = write_prompts(tmp_path / "p.jsonl", 3)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    _, errors = assert_exactly_once(tmp_path / "out", ids)
    assert all(e["attempts"] == 1 for e in errors)
    assert errors[0]["error"] == {
        "type": "PermanentError",
        "message": "HTTP 400: prompt is too long",
        "status": 400,
        "server": server.url.split("://")[1],
    }
    assert len(server.requests) == 3


def test_retries_are_bounded_and_recorded(tmp_path, fake_server):
    server = fake_server(faults=["500"])
    ids = write_prompts(tmp_path / "p.jsonl", 2)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    _, errors = assert_exactly_once(tmp_path / "out", ids)
    assert {e["attempts"] for e in errors} == {4}  # 1 + --max-retries 3
    assert errors[0]["error"]["type"] == "ServerFault"


def test_connection_reset_mid_response(tmp_path, fake_server):
    server = fake_server(faults=["reset", "ok", "ok"])
    ids = write_prompts(tmp_path / "p.jsonl", 30)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors and result.stats.completed == 30
    assert any(r["meta"]["attempts"] > 1 for r in completions)


def test_hanging_requests_time_out_and_go_elsewhere(tmp_path, fake_server):
    hanging = fake_server(faults=["hang"])
    good = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 20)
    result = run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        [hanging.url, good.url],
        timeouts=Timeouts(request=1.0, connect=1.0),
    )
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors and result.exit_code == 0
    assert {r["meta"]["server"] for r in completions} == {good.url}


def test_a_server_that_stops_answering_is_taken_out_and_its_requests_move(tmp_path, fake_server):
    # Requests and health checks both hang; the request timeout (30 s) is far away, so only
    # the liveness check can move these requests.
    stuck = fake_server(faults=["hang"], models_hang=False)
    good = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 20)

    def wedge() -> None:
        stuck.behaviour.models_hang = True

    threading.Timer(0.2, wedge).start()
    started = time.monotonic()
    result = run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        [stuck.url, good.url],
        timeouts=Timeouts(request=30, connect=1.0),
    )
    assert time.monotonic() - started < 20
    assert_exactly_once(tmp_path / "out", ids)
    assert any("stopped answering health checks" in e for e in result.stats.events)


def test_a_server_too_busy_for_health_checks_stays_while_it_answers(tmp_path, fake_server):
    """llama-cpp-python's server answers /v1/models only between generations: on a loaded
    machine every health check of it times out while its answers keep coming. An answer is
    proof of life, so it is not taken out (its requests would be aborted and sent again)."""
    busy = fake_server(slow(0.05))  # 8 tokens: 0.4 s an answer, 4 at a time
    ids = write_prompts(tmp_path / "p.jsonl", 24)

    def block_health_checks() -> None:
        busy.behaviour.models_hang = True  # after the preflight, which asks /v1/models

    threading.Timer(0.3, block_health_checks).start()
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [busy.url])
    assert result.exit_code == 0, result.message
    assert_exactly_once(tmp_path / "out", ids)
    assert not any("health checks" in e for e in result.stats.events), result.stats.events
    assert busy.served == 24  # nothing aborted and sent again


def test_server_killed_and_restarted_mid_run(tmp_path, fake_server):
    steady = fake_server(slow(0.01))
    flaky = fake_server(slow(0.01))
    ids = write_prompts(tmp_path / "p.jsonl", 150)
    reborn: list[FakeServer] = []

    def kill() -> None:
        flaky.stop()

    def restart() -> None:
        reborn.append(FakeServer(slow(0.01), port=flaky.port).start())

    threading.Timer(0.3, kill).start()
    threading.Timer(1.5, restart).start()
    try:
        result = run(tmp_path / "p.jsonl", tmp_path / "out", [steady.url, flaky.url])
    finally:
        wait_until(lambda: reborn, 30, "the restarted server")
        for server in reborn:
            server.stop()
    _completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors and result.exit_code == 0
    events = " ".join(result.stats.events)
    assert "taken out of rotation" in events


def test_all_servers_down_for_a_while_then_back(tmp_path, fake_server):
    first = fake_server(slow(0.01))
    ids = write_prompts(tmp_path / "p.jsonl", 60)
    reborn: list[FakeServer] = []
    threading.Timer(0.2, first.stop).start()
    threading.Timer(
        2.0, lambda: reborn.append(FakeServer(slow(0.01), port=first.port).start())
    ).start()
    try:
        result = run(tmp_path / "p.jsonl", tmp_path / "out", [first.url])
    finally:
        wait_until(lambda: reborn, 30, "the restarted server")
        for server in reborn:
            server.stop()
    _completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors, errors[:2]
    events = " ".join(result.stats.events)
    assert "every server is down" in events and "answers again" in events


def test_give_up_after_bounds_the_wait(tmp_path, fake_server):
    server = fake_server(slow(0.01))
    write_prompts(tmp_path / "p.jsonl", 50)
    threading.Timer(0.2, server.stop).start()
    from gen_helpers import quick_config
    from regen.fleet.dispatch import HealthPolicy

    health = HealthPolicy(
        liveness_interval=0.5, liveness_timeout=0.5, liveness_failures=2, give_up_after=1.0
    )
    config = quick_config(tmp_path / "p.jsonl", tmp_path / "out", [server.url], health=health)
    from regen.run.generate import generate

    result = generate(config)
    assert result.exit_code == StopReason.FLEET_DOWN.exit_code
    assert "resume" in result.message
    # What finished is kept; nothing is recorded as an error for a fleet outage.
    from gen_helpers import read_lines

    assert not [e for e in read_lines(tmp_path / "out", "errors") if e["sample"] is not None]


def test_slow_server_does_not_hold_back_fast_ones(tmp_path, fake_server):
    fast = fake_server(slow(0.002, slots=4))
    sluggish = fake_server(slow(0.05, slots=4))
    ids = write_prompts(tmp_path / "p.jsonl", 200)
    started = time.monotonic()
    run(tmp_path / "p.jsonl", tmp_path / "out", [fast.url, sluggish.url])
    elapsed = time.monotonic() - started
    completions, _ = assert_exactly_once(tmp_path / "out", ids)
    by_server = {s.url: 0 for s in (fast, sluggish)}
    for record in completions:
        by_server[record["meta"]["server"]] += 1
    # Round-robin would give each 100 and take 100 * 0.4 s / 4 = 10 s; least-loaded keeps
    # the slow one to a small share.
    assert by_server[fast.url] > 3 * by_server[sluggish.url]
    assert elapsed < 8


def test_degenerate_answers_raise_the_alarm(tmp_path, fake_server):
    ok = fake_server(answer=lambda body: {"content": "OK.", "tokens": 2})
    write_prompts(tmp_path / "p.jsonl", 120)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [ok.url])
    assert result.exit_code == 0
    assert any("QUALITY ALARM repeated_answers" in e for e in result.stats.events)
    import orjson

    progress = orjson.loads((tmp_path / "out" / "progress.json").read_bytes())
    assert any(a.startswith("repeated_answers") for a in progress["quality"]["alarms"])


def test_abort_on_degenerate_stops_the_run(tmp_path, fake_server):
    empty = fake_server(
        slow(0.01, answer=lambda body: {**echo_answer(body), "content": "", "tokens": 1})
    )
    write_prompts(tmp_path / "p.jsonl", 2000)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [empty.url], abort_on_degenerate=True)
    assert result.exit_code == 4
    assert result.stats.completed < 2000
    assert any("empty" in e for e in result.stats.events)


def test_retry_after_pauses_the_server_instead_of_hammering_it(tmp_path, fake_server):
    busy = fake_server(faults=["429"], retry_after=30)
    good = fake_server(slow(0.002))
    ids = write_prompts(tmp_path / "p.jsonl", 60)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [busy.url, good.url])
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors and result.exit_code == 0
    # Only the first wave (its 4 slots) reached the busy server; then it was left alone.
    assert len(busy.requests) <= 4
    assert {r["meta"]["server"] for r in completions} == {good.url}
