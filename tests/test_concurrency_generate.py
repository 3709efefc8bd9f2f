"""Live concurrency in `generate` end to end, on fake engines: the level found and shown,
failures that are the engine's and not the level's, the level a resumed run starts at,
--concurrency N kept exactly, a raised level filled at once, and the first windows."""

from __future__ import annotations

import json

import pytest

from concurrency_helpers import levels_told, live_run
from gen_helpers import assert_exactly_once, run, write_prompts
from regen.errors import (
    EngineAborted,
    Overloaded,
    RequestTimeout,
    ServerFault,
    TransportError,
)
from regen.fleet.control import concurrency, tuning
from regen.fleet.server import Server, Timeouts
from regen.testing.cpu_hog import cpu_hogs
from regen.testing.fake_engine import EngineCurve
from regen.testing.fake_server import Behaviour, echo_answer


@pytest.mark.parametrize("hogs", [0, 2], ids=["quiet", "beside-2-cpu-hogs"])
def test_generate_finds_a_level_above_the_old_default_and_shows_it(tmp_path, fake_server, hogs):
    """Also with every core of the client busy (a loaded CI once kept it at 64): the climb
    rests on what each level pays, not on how fast the client reads its answers."""
    # Few, long answers on a slow clock: the in-process server must not run out of CPU first.
    # Enough of them for a climb that a busy client's noisy window held back once to be
    # probed again (with 400, one CI run beside the hogs never went past 64).
    curve = EngineCurve(kv_tokens=20_000, max_running=512, time_scale=0.5, ticks=8)
    with cpu_hogs(hogs):
        server, out = live_run(tmp_path, fake_server, curve, 100, 800)
    snap = json.loads((out / "progress.json").read_text())
    (served,) = snap["servers"]
    assert served["concurrency_cap"] == 1024
    assert 1 <= served["concurrency"] <= 1024 and served["concurrency_why"] != "fixed"
    assert server.peak_in_flight > 64  # the old fixed default: the engine had room for more
    assert ended_levels(out) == [
        {key: served[key] for key in ("url", "concurrency", "concurrency_cap", "concurrency_why")}
    ]


@pytest.mark.parametrize(
    ("fault", "hogs"), [("abort", 0), ("stream_error", 0), ("stream_error", 2)]
)
def test_an_engines_failed_requests_fail_themselves_not_the_level(
    tmp_path, fake_server, fault, hogs
):
    """One request in ten aborted by the engine (finish_reason abort), or streamed and ended
    by an in-stream 503 after half its answer (a failed request, as SGLang and vLLM send it),
    is retried, and the level climbs as on a clean engine: a failed request says nothing
    about the level (it was halved at every window, down to 1 in flight: 32 at most). The
    same beside two CPU hogs: a busy client is no full server either."""
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
    with cpu_hogs(hogs):
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


@pytest.mark.parametrize("hogs", [0, 2], ids=["quiet", "beside-2-cpu-hogs"])
def test_an_engine_that_queues_past_its_running_limit_is_held_near_it(tmp_path, fake_server, hogs):
    """The engine runs at most 48 and queues the rest for good: the queue never drains in a
    window, so the level comes back to about what runs, however much the cache holds. 1,000
    prompts give it time to climb past 48, meet the queue, overshoot to a cliff and come back
    (with 300, a quiet machine's run ended at the cliff's 128 in 3 of 4 tries; with 600, a
    quiet one comes back at 11 s of 17, and a CI beside the hogs ended at 256, its verdict
    not yet in). Beside two CPU hogs (a CI at load 7-12 once read the queue as a level that
    paid and climbed to the cap, 1,024, "not full"): a busy client's window climbs nothing.
    A failure prints the run's window verdicts (concurrency_helpers.level_log)."""
    curve = EngineCurve(kv_tokens=2_000_000, max_running=48, time_scale=0.5, ticks=8)
    with cpu_hogs(hogs):
        server, out = live_run(tmp_path, fake_server, curve, 100, 1000)
    (left,) = ended_levels(out)
    told = f"{left}\n{levels_told(tmp_path)}"
    assert 24 <= left["concurrency"] <= 72, told  # 32 on a starved machine (load 11)
    assert server.peak_in_flight > left["concurrency"]  # it went past the queue and came back


@pytest.mark.parametrize("hogs", [0, 2], ids=["quiet", "beside-2-cpu-hogs"])
def test_a_resumed_run_starts_each_server_where_the_last_session_left_it(
    tmp_path, fake_server, hogs
):
    """The resumed session opens at the stored level, whatever the client's pace: its
    answers are made long enough (300 tokens, seconds each) that a client slowed by two
    CPU hogs still has all of them sent before the first ones end (with 100-token answers, a
    CI at load 7-12 peaked at 214 against a stored 634: the client, not the level)."""
    curve = EngineCurve(kv_tokens=20_000, max_running=512, time_scale=0.5, ticks=8)
    server, out = live_run(tmp_path, fake_server, curve, 100, 400)
    (left,) = ended_levels(out)
    assert left["concurrency"] > 2 * concurrency.START  # it had climbed
    prompts = tmp_path / "prompts.jsonl"
    ids = write_prompts(prompts, 400 + left["concurrency"])  # one more prompt per slot
    server.peak_in_flight = 0
    server.behaviour.answer = lambda body: {**echo_answer(body), "tokens": 300}
    with cpu_hogs(hogs):
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
