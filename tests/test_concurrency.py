"""Live concurrency: the decision (`concurrency.decide`) window by window, on its own and
driven along fake engine curves, and the engine /metrics parser. Probing for the top:
test_concurrency_probe.py; `generate` end to end: test_concurrency_generate.py."""

from __future__ import annotations

import time

import pytest

from concurrency_helpers import drive, full, knee_at, run_curve
from regen.errors import (
    Overloaded,
)
from regen.fleet.control import concurrency
from regen.fleet.control.concurrency import Level, Window, decide
from regen.fleet.engine_metrics import parse
from regen.fleet.server import Server
from regen.testing.fake_engine import EngineCurve
from regen.testing.fake_metrics import metrics_text
from regen.testing.fake_server import FakeEngine


def test_it_climbs_to_a_knee_far_above_the_start_and_holds_there():
    history = run_curve(knee_at(700), concurrency.start(cap=4096), 100)
    reached = next(i for i, (_, rate) in enumerate(history) if rate >= 0.95 * 7000)
    assert reached <= 10  # 16 -> 700 in a few windows
    after = [rate for _, rate in history[reached:]]
    assert sum(after) / len(after) >= 0.97 * 7000
    assert max(level.limit for level, _ in history[reached + 2 :]) < 1000  # probes stay near


def test_the_cap_bounds_it():
    history = run_curve(knee_at(700), concurrency.start(cap=100), 60)
    assert max(level.limit for level, _ in history) == 100
    late = [rate for _, rate in history[10:]]  # probes below the cap are rare there
    assert sum(late) / len(late) >= 0.97 * 1000


def test_a_stated_limit_is_where_it_starts():
    assert concurrency.start(cap=1024, stated=256).limit == 256
    assert concurrency.start(cap=64, stated=256).limit == 64
    assert concurrency.start(cap=1024).limit == concurrency.START


@pytest.mark.parametrize("cost", [20.0, 1.0])
def test_preemptions_that_cost_output_bring_it_back_below_them(cost):
    def kv_limited(n: int):
        if n <= 120:
            return 10.0 * n, {"preemptions": 0}
        return 10.0 * 120 - cost * (n - 120), {"preemptions": n - 120}

    history = run_curve(kv_limited, concurrency.start(cap=1024), 80)
    tail = [rate for _, rate in history[20:]]
    assert sum(tail) / len(tail) >= 0.95 * 1200
    if cost > 10:  # steep: it settles below the KV cache's edge
        assert history[-1][0].limit <= 120


def test_a_flat_curve_without_metrics_holds_low():
    """The CPU engine of issue 27: 18.4, 23.9, 26.2 tok/s at 2, 8, 32 in flight; flat on."""
    points = {1: 10.0, 2: 18.4, 4: 21.0, 8: 23.9, 16: 25.0, 32: 26.2}

    def cpu(n: int):
        below = [v for k, v in points.items() if k <= n]
        return max(below) * (1 + 0.001 * min(n, 64)), {}

    level = drive(cpu, concurrency.start(cap=1024))
    assert level.limit <= 40  # never near the 128 at which that engine died


def test_a_start_past_the_top_of_a_falling_curve_is_left_downwards():
    """The real vLLM CPU fleet of BENCHMARKS.md (two servers, a core each), per server: best
    at 8 in flight, a little less at 16 and 32, a cliff past 32 (its batch outgrows a core)."""
    points = {1: 13.5, 2: 19.1, 4: 31.2, 8: 35.7, 16: 34.3, 32: 30.9, 64: 10.4, 1024: 6.6}

    def cpu(n: int):
        return points[max(k for k in points if k <= n)] * (1 - 0.002 * n), {}

    history = run_curve(cpu, concurrency.start(cap=1024), 60)
    late = [rate for _, rate in history[10:]]
    assert sum(late) / len(late) >= 0.95 * cpu(8)[0]
    assert max(level.limit for level, _ in history) <= 32  # never over the cliff
    # and from a start far below, the climb is as before: a step up paid, nothing halves
    gpu = run_curve(knee_at(700), concurrency.start(cap=4096), 12)
    assert all(level.reason != "below" for level, _ in gpu)


def test_a_burst_of_refusals_halves_the_level_and_a_ceiling_keeps_it_under():
    """429/503 before the first token, a share of the requests over windows: a full server,
    when half the level pays as much."""
    level = Level(limit=200, cap=1024, best_rate=100.0, best_limit=200, climbing=False)
    for _ in range(2):  # 20 requests so far, 8 refused: too few requests to judge yet
        level = decide(level, full(100.0, errors=4, requests=10))
        assert level.limit == 200
    level = decide(level, full(100.0, errors=4, requests=20))
    assert (level.limit, level.reason, level.refused_from) == (100, "refused", 200)
    level = decide(level, full(100.0, requests=10))  # half the level pays as much: kept
    assert (level.limit, level.ceiling) == (100, 200)
    for _ in range(10):
        level = decide(level, full(100.0 + level.limit, requests=10))
    assert level.limit < 200


def test_refusals_a_lower_level_does_not_pay_for_are_borne():
    """A fifth of the requests refused at every level (a fault of the fleet's, not a full
    queue): halving the level keeps the refusals and loses output, so it goes back up and
    bears them; where half the level pays as much, the refusals were back-pressure: kept."""
    level = Level(limit=256, cap=1024, best_rate=2560.0, best_limit=256, climbing=False)
    trace = []
    for _ in range(40):
        level = decide(level, full(10.0 * level.limit, errors=8, requests=40))
        trace.append((level.limit, level.reason))
    assert trace[0] == (128, "refused") and trace[1] == (256, "refusals cost less"), trace
    assert all(limit >= 256 for limit, _ in trace[1:25]), trace  # borne a while
    assert [why for _, why in trace].count("refused") >= 2  # tried again once borne a while
    flat = Level(limit=256, cap=1024, best_rate=1280.0, best_limit=256, climbing=False)
    for _ in range(3):  # the knee is at 128: the level above it only queues and refuses
        refused = 8 if flat.limit > 128 else 0
        flat = decide(flat, full(10.0 * min(128, flat.limit), errors=refused, requests=40))
    assert (flat.limit, flat.ceiling) == (128, 256), flat


def test_scattered_refusals_in_short_windows_never_lower_the_level():
    """One refusal in 25 requests, in windows of 8 requests (a climb on a busy client): one
    503 in a window used to halve the level at once, and at every window it came."""
    level, ended = concurrency.start(cap=1024), 0
    for _ in range(200):
        errors = (ended + 8) // 25 - ended // 25
        ended += 8
        level = decide(level, full(10.0 * min(level.limit, 300), errors=errors, requests=8))
        assert level.reason != "refused"
    assert level.limit >= 240


def test_a_failed_request_after_tokens_does_not_pause_its_server_nor_count_as_a_refusal():
    server = Server("http://127.0.0.1:9", 8)
    failed = Overloaded("HTTP 503: request aborted", status=503)
    failed.after_tokens = True  # the stream had brought some of the answer
    assert not server.record_failure(failed, pause=60.0)
    assert server.can_take(time.monotonic()) and server.stats.load_failures == 0
    assert server.stats.failed == 1 and server.breaker.consecutive_failures == 1
    refused = Overloaded("HTTP 503: queue full", status=503)  # before any token
    server.record_failure(refused, pause=60.0)
    assert server.can_take(time.monotonic()) and server.stats.load_failures == 1


def test_refusals_pause_a_server_only_when_it_asks_or_refuses_a_full_servers_share():
    """One refusal before any token among many requests is a failed request: it waits its
    own retry delay, and the server goes on taking work. Five of the last 32 sent is a full
    server: new requests wait. A Retry-After is the server asking: always honoured."""
    server = Server("http://127.0.0.1:9", 64)
    for sent in range(1, 101):
        server.claim()
        server.release()
        if sent % 10 == 0:  # one in ten, as a fault rate of its own: 3 in any 32
            server.record_failure(Overloaded("HTTP 503", status=503), pause=60.0)
            assert server.can_take(time.monotonic()), sent
    for _ in range(2):  # two more among the last few sent: 5 of 32
        server.claim()
        server.release()
        server.record_failure(Overloaded("HTTP 503", status=503), pause=60.0)
    assert not server.can_take(time.monotonic())
    polite = Server("http://127.0.0.1:9", 64)
    polite.claim()
    polite.release()
    polite.record_failure(Overloaded("HTTP 429", status=429, retry_after=60.0), pause=0.0)
    assert not polite.can_take(time.monotonic())


def test_an_error_event_is_after_tokens_only_once_the_answer_began():
    import orjson

    from regen.fleet.stream import StreamAccumulator
    from regen.testing.fake_faults import stream_error_event

    error = b"data: " + orjson.dumps(stream_error_event()) + b"\n\n"
    role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    text = b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
    for events, begun in ((role, False), (role + text, True)):
        stream = StreamAccumulator("s")
        with pytest.raises(Overloaded):
            stream.feed_bytes(events + error)
        assert stream.has_tokens is begun


def test_output_that_falls_as_the_level_rises_steps_it_back_down_through_noisy_windows():
    """An engine regen has not met (no /metrics): output rises to 256 in flight, then falls
    a little at each step past it (KV recompute), never by a cliff's 25% at once; windows
    read +-10%. A level held far past the top (a probe that read high on noise, as on a busy
    client) walks back down: probes below pay, and no probe that reads high ratchets it up."""
    import random

    noise = random.Random(46)

    def unmet(n: int):
        peak = 1785.0 * min(n, 256) / 256 if n < 128 else 1596.0 + 189.0 * min(n - 128, 128) / 128
        fall = max(0.55, 1 - 0.6 * max(0, n - 256) / 256)
        return peak * fall * noise.uniform(0.9, 1.1), {}

    for first in (concurrency.start(cap=1024), Level(limit=800, cap=1024, climbing=False)):
        history = run_curve(unmet, first, 300)
        late = [level.limit for level, _ in history[150:]]
        assert sum(late) / len(late) <= 330, (first.limit, late[-20:])
        assert sum(1 for n in late if n > 400) <= 5, late


def test_a_long_engine_queue_brings_it_down_to_what_runs():
    level = Level(limit=400, cap=1024, climbing=False)
    level = decide(level, full(100.0, waiting=300.0, running=100.0))
    assert 100 <= level.limit <= 110 and level.reason == "queue"


def test_a_slow_or_recovering_server_is_not_taken_for_a_full_one():
    level = Level(limit=300, cap=1024, best_rate=1000.0, best_limit=300, climbing=False)
    # in flight well below the level (back from down, or the run's end): nothing decided
    assert decide(level, Window(1.0, 10.0, busy=0.3)).limit == 300
    # full but much slower (another job on its GPU): the rate alone never lowers the level
    slower = decide(level, full(200.0))
    assert slower.limit == 300
    # and a probe is then judged against the slower present, not the past
    for _ in range(concurrency.PROBE_EVERY + 3):
        slower = decide(slower, full(200.0 * slower.limit / 300))  # it would gain now
    assert slower.limit > 375


def test_the_engines_metrics_are_read_in_both_dialects():
    for dialect in ("vllm", "sglang"):
        engine = FakeEngine(EngineCurve(kv_tokens=32000, block=16))
        engine.counters.generation_tokens, engine.counters.preemptions = 1234, 5
        load = parse(metrics_text(dialect, engine, "m"))
        assert load.generated == 1234 and load.preemptions == 5
        assert load.running == 0 and load.waiting == 0
    assert (
        parse(metrics_text("vllm", FakeEngine(EngineCurve(kv_tokens=32000)), "m")).kv_tokens
        == 32000
    )
    assert parse("# nothing here\n").generated is None
