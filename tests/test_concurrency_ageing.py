"""Live concurrency's rules for engines it has never seen (issue 56), window by window: a
step read young is read again once its requests aged (its preemptions too), a level that
falls under the one it came from goes back, a doubling that nearly doubled is followed by
x4, a busy client's window climbs nothing, and a late loop reads longer."""

from __future__ import annotations

from dataclasses import replace

from concurrency_helpers import full
from regen.fleet.control import concurrency
from regen.fleet.control.concurrency import Window, decide
from regen.fleet.control.tracker import Tracker
from regen.fleet.control.window import LATE_WINDOWS, clearly_worse, ready
from regen.fleet.engine_metrics import EngineLoad
from regen.fleet.server import Server


def _climbed_to_32(rate_16: float = 100.0, rate_32: float = 200.0):
    level = decide(concurrency.start(cap=1024), full(rate_16, aged=False))
    return decide(level, full(rate_32, aged=False))


def test_a_young_step_that_does_not_clearly_pay_is_read_again_once_aged():
    level = _climbed_to_32(100.0, 170.0)  # +70%: a clear gain, read young
    assert level.limit == 64
    young = decide(level, full(220.0, aged=False))  # +30% read before its requests grew
    assert (young.limit, young.reason, young.ageing) == (64, "ageing", True)
    aged = decide(young, full(110.0))  # aged, it pays far less than 32 did: a cliff
    assert (aged.limit, aged.reason, aged.ceiling) == (32, "cliff", 64)


def test_a_doubling_that_nearly_doubled_is_followed_by_x4_and_one_that_paid_less_by_half():
    level = _climbed_to_32()  # 16 -> 32 doubled the output
    assert level.limit == 128 and level.step == 4.0
    within = decide(level, full(300.0))  # x4 for +50%: the top is inside the step
    assert (within.limit, within.reason) == (64, "plateau")


def test_preemptions_in_a_young_window_of_a_step_that_paid_are_read_again_aged():
    """A step's own admission (all its new requests prefilled at once) can preempt a few in
    its first window, in a cache that holds the level once they are decoding."""
    level = _climbed_to_32()  # 16 -> 32 doubled the output: x4 next
    assert level.limit == 128
    young = decide(level, full(300.0, aged=False, preemptions=3))  # +50%, and preemptions
    assert (young.limit, young.reason, young.ageing) == (128, "ageing", True)
    holds = decide(young, full(780.0, preemptions=0))  # aged: none left, and x3.9
    assert holds.limit > 128 and holds.climbing
    preempts = decide(young, full(260.0, preemptions=5))  # aged: a cache too small for it
    assert (preempts.limit, preempts.reason, preempts.ceiling) == (64, "preemptions", 128)
    no_gain = decide(level, full(205.0, aged=False, preemptions=3))  # young, and no gain
    assert (no_gain.limit, no_gain.reason) == (64, "preemptions")


def test_a_held_level_that_falls_under_the_level_it_came_from_goes_back_to_it():
    level = concurrency.start(cap=1024, last=100)
    for _ in range(concurrency.PROBE_EVERY):
        level = decide(level, full(1000.0))
    level = decide(level, full(1300.0))  # 125 paid +30% when it was probed
    level = replace(level, limit=level.best_limit, climbing=False, held=0)  # held there
    fell = decide(level, full(750.0))  # and now pays far less than 100 did
    assert (fell.limit, fell.reason, fell.ceiling) == (100, "fell under the level below", 125)


def test_a_step_up_is_not_taken_from_a_window_the_client_did_not_keep_full():
    level = decide(concurrency.start(cap=1024), full(100.0, aged=False))
    behind = decide(level, Window(seconds=1.0, tokens=400.0, busy=0.9, aged=False))  # 90% in
    assert (behind.limit, behind.reason) == (32, "client behind")


def test_a_resumed_level_is_held_where_the_last_session_left_it():
    level = concurrency.start(cap=1024, last=600)
    assert (level.limit, level.climbing, level.first_climb) == (600, False, False)
    assert decide(level, full(1000.0)).limit == 600


def test_a_window_read_on_a_late_loop_is_read_longer():
    tracker = Tracker(Server("http://127.0.0.1:9", 64), concurrency.Level(limit=64, cap=64))
    tracker.started = tracker.counting_from = 0.0
    tracker.late = 0.5  # the loop woke up half a second late
    assert not ready(tracker, LATE_WINDOWS * 0.5 - 0.1, length=1.0)
    assert ready(tracker, LATE_WINDOWS * 0.5 + 0.1, length=1.0)


def test_a_window_whose_rate_still_moves_is_read_longer_unless_it_already_pays_less():
    tracker = Tracker(Server("http://127.0.0.1:9", 64), concurrency.Level(limit=64, cap=64))
    tracker.level = replace(tracker.level, best_rate=50.0)
    tracker.samples = [(0.0, 0.0), (1.0, 100.0), (2.0, 200.0), (3.0, 260.0), (4.0, 320.0)]
    tracker.first, tracker.last = EngineLoad(generated=0.0), EngineLoad(generated=320.0)
    tracker.measured_from, tracker.last_at = 0.0, 4.0
    assert not ready(tracker, 4.0, length=4.0)  # 100/s, then 60/s: still moving
    assert ready(tracker, 12.0, length=4.0)  # read three times its length: judged now
    tracker.level = replace(tracker.level, best_rate=500.0)
    assert ready(tracker, 4.0, length=4.0)  # under the best level's anyway: no need to wait


def test_a_busy_clients_noise_does_not_climb_an_engine_whose_running_batch_stopped_growing():
    # An engine that runs 48 and queues the rest, read by a client whose every window reads
    # 30% more than the last (a busy loop's noise): a step whose running batch did not grow
    # cannot have paid, so the climb stops at the first step past 48 and comes back near it.
    level, rate, seen = concurrency.start(cap=1024), 100.0, []
    for _ in range(8):
        n = level.limit
        rate *= 1.3
        level = decide(level, full(rate, running=min(n, 48), waiting=max(0, n - 48)))
        seen.append(level.limit)
    assert max(seen) <= 128
    assert 40 <= level.limit <= 64


def test_a_step_read_in_a_full_window_against_a_level_read_in_a_short_one_reads_that_again():
    """The real vLLM CPU server: 32 read 418 tok/s in a 2-s window (a climb's short window,
    with room in the cache), 64 then 376 in a 10-s one; the later windows at 32 read 264-302.
    A short window reads noise as a gain: the level below is read again, in a full window."""
    level = decide(concurrency.start(cap=1024), full(200.0, short=True))
    level = decide(level, full(418.0, short=True))  # a doubling that paid, read short
    assert level.limit == 64
    at_64 = decide(level, full(376.0))  # a full window: 10% under the short one's reading
    assert (at_64.limit, at_64.reason) == (32, "read below aged")
    back = decide(at_64, full(300.0))  # 32, read in a full window too, pays less: back up
    assert (back.limit, back.reason) == (64, "lower pays less")
    # (read in full windows both, 64 paying less is a plateau, as before)
    level = decide(concurrency.start(cap=1024), full(200.0, short=True))
    level = decide(level, full(418.0))
    assert decide(level, full(376.0)).reason == "plateau"


def test_a_level_backed_off_to_on_preemptions_is_left_at_once_when_it_reads_far_less():
    """Backed off from 640 on preemptions, the first window at 544 is preempted as well: it
    is held where it pays about what 640 read (a mild cliff), and left at once, without
    waiting out its window, where it reads a third of it (still past a harsh cliff: draw 171
    of the family bench, in one order of its answers, held 512 for two minutes at a third
    of 640's output, its windows a minute long as the thrashing requests slowed)."""
    held = concurrency.Level(
        limit=640,
        cap=1024,
        best_rate=14_000.0,
        best_limit=640,
        climbing=False,
        first_climb=False,
        held=2,
    )
    backed = decide(held, full(12_000.0, preemptions=5))  # under its own best: back off
    assert (backed.limit, backed.reason, backed.above_rate) == (544, "preemptions", 12_000.0)
    mild = decide(backed, full(11_000.0, preemptions=5))
    assert (mild.limit, mild.reason) == (544, "preemptions: holding")
    harsh = decide(backed, full(4_000.0, preemptions=5))
    assert (harsh.limit, harsh.reason, harsh.ceiling) == (462, "preemptions", 544)

    tracker = Tracker(Server("http://127.0.0.1:9", 544), backed)
    tracker.first, tracker.last = EngineLoad(generated=0.0), EngineLoad(generated=8_000.0)
    tracker.measured_from, tracker.last_at = 0.0, 2.0  # 4,000 tok/s so far
    assert clearly_worse(tracker)  # under half what 640 read: the window closes now
    tracker.level = replace(backed, above_rate=0.0)  # (nothing known above: read it out)
    assert not clearly_worse(tracker)
