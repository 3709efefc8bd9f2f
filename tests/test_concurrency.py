"""Live concurrency: the decision (`concurrency.decide`) window by window, on its own, and
driven against fake engine curves; the engine /metrics parser; generate end to end."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from gen_helpers import assert_exactly_once, run, write_prompts
from regen.errors import (
    EngineAborted,
    Overloaded,
    RequestTimeout,
    ServerFault,
    TransportError,
)
from regen.fleet.control import concurrency, tuning
from regen.fleet.control.concurrency import Level, Window, decide
from regen.fleet.engine_metrics import parse
from regen.fleet.server import Server, Timeouts
from regen.testing.fake_engine import EngineCurve
from regen.testing.fake_metrics import metrics_text
from regen.testing.fake_server import Behaviour, FakeEngine, echo_answer


def full(rate: float, **kw) -> Window:
    return Window(seconds=1.0, tokens=rate, busy=1.0, **kw)


def drive(curve, level: Level, windows: int = 60) -> Level:
    """Feed `decide` the windows a server with output rate `curve(n)` would give."""
    return run_curve(curve, level, windows)[-1][0]


def run_curve(curve, level: Level, windows: int) -> list[tuple[Level, float]]:
    history = []
    for _ in range(windows):
        rate, extra = curve(level.limit)
        history.append((level, rate))
        level = decide(level, full(rate, **extra))
    return history


def knee_at(knee: int, per: float = 10.0):
    """Linear up to `knee`, flat beyond it with a queue (max running requests)."""
    return lambda n: (per * min(n, knee), {"waiting": max(0, n - knee), "running": min(n, knee)})


def live_run(tmp_path, fake_server, curve: EngineCurve, tokens: int, count: int, **overrides):
    """`generate` with live concurrency (unless `overrides` say otherwise) on one fake vLLM
    engine whose answers are `tokens` long; every prompt answered exactly once."""
    behaviour = Behaviour(
        dialect="vllm", engine=curve, answer=lambda b: {**echo_answer(b), "tokens": tokens}
    )
    server = fake_server(behaviour)
    prompts, out = tmp_path / "prompts.jsonl", tmp_path / "out"
    ids = write_prompts(prompts, count)
    run(prompts, out, [server.url], **({"concurrency": None} | overrides))
    assert_exactly_once(out, ids)
    return server, out


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
    """429/503 before the first token, a share of the requests over windows: a full server."""
    level = Level(limit=200, cap=1024, best_rate=100.0, best_limit=200, climbing=False)
    for _ in range(2):  # 20 requests so far, 8 refused: too few requests to judge yet
        level = decide(level, full(100.0, errors=4, requests=10))
        assert level.limit == 200
    level = decide(level, full(100.0, errors=4, requests=20))
    assert (level.limit, level.reason, level.ceiling) == (100, "refused", 200)
    for _ in range(10):
        level = decide(level, full(100.0 + level.limit, requests=10))
    assert level.limit < 200


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
    refused = Overloaded("HTTP 503: queue full", status=503)  # before any token: full
    server.record_failure(refused, pause=60.0)
    assert not server.can_take(time.monotonic()) and server.stats.load_failures == 1


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


def test_generate_finds_a_level_above_the_old_default_and_shows_it(tmp_path, fake_server):
    # Few, long answers on a slow clock: the in-process server must not run out of CPU first.
    curve = EngineCurve(kv_tokens=20_000, max_running=512, time_scale=0.5, ticks=8)
    server, out = live_run(tmp_path, fake_server, curve, 100, 400)
    snap = json.loads((out / "progress.json").read_text())
    (served,) = snap["servers"]
    assert served["concurrency_cap"] == 1024
    assert 1 <= served["concurrency"] <= 1024 and served["concurrency_why"] != "fixed"
    assert server.peak_in_flight > 64  # the old fixed default: the engine had room for more
    assert ended_levels(out) == [
        {key: served[key] for key in ("url", "concurrency", "concurrency_cap", "concurrency_why")}
    ]


@pytest.mark.parametrize("fault", ["abort", "stream_error"])
def test_an_engines_failed_requests_fail_themselves_not_the_level(tmp_path, fake_server, fault):
    """One request in ten aborted by the engine (finish_reason abort), or streamed and ended
    by an in-stream 503 after half its answer (a failed request, as SGLang and vLLM send it),
    is retried, and the level climbs as on a clean engine: a failed request says nothing
    about the level (it was halved at every window, down to 1 in flight: 32 at most)."""
    curve = EngineCurve(kv_tokens=20_000, max_running=512, time_scale=0.5, ticks=8)
    server = fake_server(
        Behaviour(
            dialect="vllm",
            engine=curve,
            faults=["ok"] * 9 + [fault],
            answer=lambda b: {**echo_answer(b), "tokens": 100},
        )
    )
    ids = write_prompts(tmp_path / "prompts.jsonl", 300)
    streamed = Timeouts(request=10, connect=2, stream=fault == "stream_error")
    run(
        tmp_path / "prompts.jsonl",
        tmp_path / "out",
        [server.url],
        concurrency=None,
        timeouts=streamed,
    )
    completions, _ = assert_exactly_once(tmp_path / "out", ids)
    assert all(r["finish_reason"] == "stop" for r in completions)  # each failed one retried
    assert server.peak_in_flight > 4 * concurrency.START, server.peak_in_flight


def test_only_a_full_servers_failures_count_against_its_level():
    """429/503 and timeouts are what live concurrency backs off on; an abort, a 5xx or a
    stream cut short fails one request (retried; the circuit breaker watches the server)."""
    server = Server("http://127.0.0.1:9", 8)
    failures = [
        EngineAborted("cut short", status=200),
        ServerFault("HTTP 500"),
        TransportError("stream ended early"),
        Overloaded("HTTP 429"),
        RequestTimeout("slow"),
    ]
    for error in failures:
        server.record_failure(error, pause=0.0)
    assert (server.stats.failed, server.stats.load_failures) == (5, 2)


def test_an_engine_that_queues_past_its_running_limit_is_held_near_it(tmp_path, fake_server):
    """The engine runs at most 48 and queues the rest for good: the queue never drains in a
    window, so the level comes back to about what runs, however much the cache holds. 600
    prompts give it time to climb past 48, meet the queue, overshoot to a cliff and come back
    (with 300, a quiet machine's run ended at the cliff's 128 in 3 of 4 tries)."""
    curve = EngineCurve(kv_tokens=2_000_000, max_running=48, time_scale=0.5, ticks=8)
    server, out = live_run(tmp_path, fake_server, curve, 100, 600)
    (left,) = ended_levels(out)
    assert 24 <= left["concurrency"] <= 72, left  # 32 on a starved machine (load 11)
    assert server.peak_in_flight > left["concurrency"]  # it went past the queue and came back


def test_a_resumed_run_starts_each_server_where_the_last_session_left_it(tmp_path, fake_server):
    curve = EngineCurve(kv_tokens=20_000, max_running=512, time_scale=0.5, ticks=8)
    server, out = live_run(tmp_path, fake_server, curve, 100, 400)
    (left,) = ended_levels(out)
    assert left["concurrency"] > 2 * concurrency.START  # it had climbed
    prompts = tmp_path / "prompts.jsonl"
    ids = write_prompts(prompts, 400 + left["concurrency"])  # one more prompt per slot
    server.peak_in_flight = 0
    run(prompts, out, [server.url], concurrency=None, allow_changed_input=True)
    assert_exactly_once(out, ids)
    # All of them at once from the first second: a fresh start would have sent 16, then 32.
    assert server.peak_in_flight >= 0.95 * left["concurrency"], (server.peak_in_flight, left)


def test_last_levels_are_the_latest_ended_sessions_live_ones():
    from regen.format.sessions import last_levels

    def ended(*servers):
        keys = ("url", "concurrency", "concurrency_why")
        return {"ended": {"servers": [dict(zip(keys, s, strict=True)) for s in servers]}}

    older = ended(("http://a", 300, "holding"), ("http://b", 40, "queue"))
    newer = ended(("http://a", 200, "holding"), ("http://c", 64, "fixed"))
    this_session = ended(("http://a", 1, "start"))  # the session starting now: not its own
    assert last_levels({"sessions": [older, newer, {}, this_session]}) == {"http://a": 200}
    assert last_levels({"sessions": [older, {"started": "killed: no end"}, {}]}) == {
        "http://a": 300,
        "http://b": 40,
    }
    assert concurrency.start(cap=1024, stated=48, last=200).limit == 200
    assert concurrency.start(cap=128, last=200).limit == 128


def test_fixed_concurrency_keeps_exactly_n(tmp_path, fake_server):
    curve = EngineCurve(kv_tokens=20_000, max_running=512, time_scale=0.5, ticks=8)
    server = fake_server(Behaviour(dialect="vllm", engine=curve))
    prompts = tmp_path / "prompts.jsonl"
    ids = write_prompts(prompts, 200)
    out = tmp_path / "out"
    run(prompts, out, [server.url], concurrency=8, fixed_concurrency=True)
    assert_exactly_once(out, ids)
    (served,) = json.loads((out / "progress.json").read_text())["servers"]
    assert (served["concurrency"], served["concurrency_why"]) == (8, "fixed")
    assert server.peak_in_flight == 8
    (ended,) = ended_levels(out)
    assert (ended["concurrency"], ended["concurrency_why"]) == (8, "fixed")


def ended_levels(out) -> list[dict]:
    """The levels the run's last session recorded in manifest.json when it ended."""
    (session,) = json.loads((out / "manifest.json").read_text())["sessions"]
    assert session["ended"]["state"] == "finished"
    return session["ended"]["servers"]


def test_status_and_the_live_view_show_each_servers_level():
    from regen.cli.status import server_lines
    from regen.display import server_cells

    live = {
        "url": "http://a:1",
        "state": "healthy",
        "in_flight": 180,
        "completed": 5,
        "failed": 0,
        "completion_tokens": 10,
        "latency_ewma_s": 1.0,
        "last_error": None,
        "concurrency": 192,
        "concurrency_cap": 1024,
        "concurrency_why": "holding",
    }
    fixed = {**live, "concurrency": 64, "concurrency_cap": 64, "concurrency_why": "fixed"}
    lines = server_lines([live, fixed], alive=True)
    assert "180 in flight (level 192 of at most 1024: holding)" in lines[1]
    assert "(fixed at 64)" in lines[2]
    assert server_cells(live)["in flight"] == "180/192"


def test_the_stated_kv_cache_is_jumped_to_only_after_a_measured_steep_gain():
    first = decide(concurrency.start(cap=1024), full(160.0, kv_fit=800))
    assert first.limit == 32  # one window is no curve: a plain doubling
    steep = decide(first, full(320.0, kv_fit=800))
    assert steep.limit == 64  # one step that paid is no curve either
    steeper = decide(steep, full(630.0, kv_fit=800))
    assert steeper.limit == 64 * concurrency.JUMP  # towards what the cache holds, bounded
    modest = decide(first, full(170.0, kv_fit=800))  # a CPU's curve: small steps, no jump
    assert modest.limit == 40
    flat = decide(first, full(162.0, kv_fit=800))
    assert flat.limit == 8 and flat.reason == "below"  # is the start past the top?
    back = decide(flat, full(150.0, kv_fit=800))
    assert back.limit == 16 and back.reason == "plateau"


def test_a_raised_level_is_filled_at_once():
    """Requests waiting for a slot take the new ones when the level rises, not at their next
    release or one-second recheck: a climb's window must run at the level it measures."""
    import asyncio

    from regen.fleet.dispatch import Fleet
    from regen.fleet.server import Server

    async def scenario() -> list[bool]:
        server = Server("http://127.0.0.1:9", concurrency=8)
        fleet = Fleet([server], on_event=lambda text: None)
        server.set_limit(1, "start")
        await fleet.acquire()
        waiting = [asyncio.ensure_future(fleet.acquire()) for _ in range(3)]
        for _ in range(5):
            await asyncio.sleep(0)
        before = [w.done() for w in waiting]
        server.set_limit(3, "climbing")
        fleet.made_room(server, 2)
        for _ in range(5):
            await asyncio.sleep(0)
        after = [w.done() for w in waiting]
        for w in waiting:
            w.cancel()
        await server.close()
        return before + after

    assert asyncio.run(scenario()) == [False] * 3 + [True, True, False]


def test_the_first_window_opens_with_the_engines_first_tokens(tmp_path, fake_server):
    """With an engine that counts its tokens, the level has climbed before the first answer
    is back: the first window measured the engine's first decoded tokens."""
    curve = EngineCurve(kv_tokens=200_000, max_running=512, time_scale=0.5, ticks=8)
    server, _ = live_run(tmp_path, fake_server, curve, 400, 120)  # more than one level's worth
    first_answer = min(server.served_at)
    sent_before = sum(1 for at in server.requested_at if at < first_answer)
    assert sent_before > concurrency.START, (sent_before, concurrency.START)


def test_a_window_spans_enough_of_the_engines_steps_to_judge_a_level(tmp_path, fake_server):
    """A slow engine (a CPU's: 0.1 s a decode step) makes half a second a few steps: the
    first level stays until MIN_STEPS steps have run at it, a window's least."""
    step = 0.1
    curve = EngineCurve(step_s=step, per_seq_s=0.0, kv_tokens=10**6, time_scale=1.0, ticks=1)
    server, _ = live_run(tmp_path, fake_server, curve, 40, 40)
    sent = sorted(server.requested_at)
    first_raise = sent[concurrency.START] - sent[0]  # the first request past the start level
    assert first_raise >= 0.75 * tuning.MIN_STEPS * step, (
        first_raise,
        sent[: concurrency.START + 1],
    )


def test_once_a_top_is_found_a_probe_never_jumps_or_doubles():
    """A CPU engine's curve jumps about: a probe from a plateau that happens to gain a lot
    steps by x1.25, not to the cache (a CPU fleet at 139 in flight runs at a quarter of 16's)."""
    level = concurrency.start(cap=1024)
    for rate in (160.0, 165.0):  # 16, then 32: no gain, so below; 8 is worse: back to 16
        level = decide(level, full(rate, kv_fit=800))
    level = decide(level, full(100.0, kv_fit=800))
    assert (level.limit, level.reason, level.first_climb) == (16, "plateau", False)
    for _ in range(concurrency.PROBE_EVERY):
        level = decide(level, full(160.0, kv_fit=800))
    assert (level.limit, level.reason) == (20, "probe")
    lucky = decide(level, full(260.0, kv_fit=800))  # +60%: one noisy window
    assert lucky.limit == 25 and lucky.reason == "climbing"
    resumed = decide(concurrency.start(cap=1024, last=40), full(100.0, kv_fit=800))
    steep = decide(resumed, full(200.0, kv_fit=800))
    assert steep.limit == 63  # x1.25 from the resumed level's 50 (no jump to 400)


def test_a_sublinear_gain_doubles_but_never_jumps_to_the_cache():
    """vLLM's CPU build: 16 to 32 in flight gains ~40% (the cores are busy), or reads +70%
    when the first window held the first prefills; 150 is a cliff. A GPU far below its knee
    nearly doubles its output at each doubling."""
    first = decide(concurrency.start(cap=1024), full(80.0, kv_fit=900))
    for rate in (114.0, 136.0):
        cpu = decide(first, full(rate, kv_fit=900))
        assert cpu.limit == 64 and cpu.reason == "climbing"  # a doubling, no jump
    sublinear = decide(cpu, full(190.0, kv_fit=900))  # 64: +40% again
    assert sublinear.limit == 128
    gpu = decide(first, full(150.0, kv_fit=900))
    gpu = decide(gpu, full(290.0, kv_fit=900))  # +93%: the batch is still free
    assert gpu.limit == 64 * concurrency.JUMP


def test_a_queue_the_output_still_rises_through_is_climbed_through():
    """vLLM's CPU build (issue 34): prompts wait for their turn in a step's token budget, a
    queue at every level, and its output still rises to 128 in flight (fixed 32: 540 tok/s,
    128: 738). The queue is a hint, not the verdict: doublings that pay are taken."""

    def budgeted(n: int):
        rate = 540.0 * min(n, 128) ** 0.225 / 32**0.225  # +17% a doubling, flat past 128
        return rate, {"waiting": 0.4 * n, "running": 0.6 * n}

    history = run_curve(budgeted, concurrency.start(cap=1024), 30)
    reached = next(i for i, (level, _) in enumerate(history) if level.limit >= 128)
    assert reached <= 4, [level.limit for level, _ in history]
    late = [rate for _, rate in history[reached:]]
    assert sum(late) / len(late) >= 0.9 * budgeted(128)[0]


def test_a_queue_that_pays_nothing_is_left_for_what_runs_and_one_that_pays_is_kept():
    held = Level(limit=128, cap=1024, best_rate=700.0, best_limit=128, climbing=False, climbed=True)
    trial = decide(held, full(700.0, waiting=40.0, running=80.0))
    assert (trial.limit, trial.reason) == (84, "queue")  # one window at what runs
    stays = decide(trial, full(695.0, waiting=0.0, running=84.0))
    assert (stays.limit, stays.reason, stays.ceiling) == (84, "queue", 128)  # it paid nothing
    back = decide(trial, full(600.0, waiting=0.0, running=84.0))
    assert (back.limit, back.reason) == (128, "queue pays")
    for _ in range(5):  # and the queue is not tried again soon
        back = decide(back, full(700.0, waiting=40.0, running=80.0))
        assert back.limit >= 128


def test_a_step_past_a_cliff_is_left_at_once_and_not_tried_again_soon():
    """An engine without /metrics whose output rises to 256 in flight and falls by a third
    past it (its KV cache thrashing), and one whose window past the top reads a little low
    (noise, or a gentle fall): only the first is a cliff."""

    def kv_cliff(n: int):
        past = max(0.0, (n - 256) / 256)
        return 1785.0 * min(n, 256) / 256 * max(0.6, 1 - 1.4 * past), {}  # 320: -35%

    level = Level(
        limit=256, cap=1024, best_rate=1785.0, best_limit=256, climbing=False, climbed=True
    )
    for _ in range(concurrency.PROBE_EVERY):
        level = decide(level, full(1785.0))
    assert (level.limit, level.reason) == (320, "probe")
    level = decide(level, full(kv_cliff(320)[0]))
    assert (level.limit, level.reason, level.ceiling) == (256, "cliff", 320)
    history = run_curve(kv_cliff, level, concurrency.CEILING_WINDOWS - 1)
    assert max(lv.limit for lv, _ in history) < 320
    assert sum(rate for _, rate in history) / len(history) >= 0.95 * 1785.0
    probe = replace(level, limit=320, climbing=True, ceiling=None)
    assert decide(probe, full(0.85 * 1785.0)).reason == "plateau"  # no ceiling for that
