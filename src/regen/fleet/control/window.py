"""How long a measurement window is read (tuning.py: the loop that reads them): its length
in request times (`length`), when it may close early (a clear gain, `doubles` and
`clearly_better`; a clear loss, `clearly_worse`) or only later (`ready`): not before its
reading is sure enough on a busy client, nor while its rate still moves.

- A busy client (two CPU hogs beside it, a loaded CI) wakes up late: the events and answers
  it counts come in bursts, and a window's count is off by what waited unread at either end
  of it, about the loop's lateness times the rate. So a window spans at least LATE_WINDOWS
  times the longest lateness in it (a tenth of a second late: a window of 0.6 s or more;
  1.5 s late: 9 s); a first climb's doubling, which must read a clear gain, two. (A client
  so busy that it cannot keep its level in flight reads `busy` under BUSY: no verdict.)
- A level's output still moving within its window (the first and the second half of it
  apart by more than NOISE: its requests still ageing, a cache filling, a noisy reading) is
  read longer, up to STRETCH times the window, and judged on the whole then; unless it is
  already under the best level's (it will not pay: past a cliff, longer only costs more).
"""

from __future__ import annotations

from regen.fleet.control.climb import clear_gain
from regen.fleet.control.queue import QUEUE_SHARE
from regen.fleet.control.tracker import Tracker
from regen.fleet.load_source import kv_fit

MIN_WINDOW = 1.0
# A window, in request times: the engine's token counter shows a bigger batch at once, the
# answers only as they finish.
WINDOW_ENGINE, WINDOW_ANSWERS = 0.6, 1.0
WINDOW_CLIMB, MIN_WINDOW_CLIMB = 0.1, 0.5  # while climbing, with the engine's counter
MIN_STEPS = 16  # a window spans at least this many of the engine's decode steps,
WORSE = 0.5  # unless its rate so far is under this share of the best level's
# By the streams: events a stream in the window (they come in bursts). Near the top a step
# gains a few percent, and 4 events a stream read that from noise (the climb stopped at half
# the knee); a first climb's step that clearly doubles is decided on fewer (see doubles).
MIN_EVENTS_DOUBLING, MIN_EVENTS = 4, 16
MIN_ANSWERS = 16  # answers a window measured by them needs before it may close early
SETTLE = 0.15  # of a request's time, after a change, before the window starts counting
# ... when only the answers can be counted (no engine counter): the answers that finish
# first after a change were mostly sent before it, at the old level, and a step up would
# read as paying less than it does (or nothing, near the knee, where each answer slows)
SETTLE_ANSWERS = 0.6
SETTLE_FIRST, FIRST_SHARE = 0.5, 0.1  # measured by its streams: see prefilling
# A window other than a first climb's doubling is read once the level's own requests have
# aged: it starts counting AGED_SETTLE of a request's time after the change and spans at
# least AGED_WINDOW of it (a step into a KV cache that fills as the requests grow reads well
# while they are young, and shows its cost only then), and MIN_AGED_WINDOW seconds.
AGED_SETTLE, AGED_WINDOW, MIN_AGED_WINDOW = 0.35, 0.35, 1.5
CACHE_ROOM = 0.6  # a level under this share of what the stated KV cache holds: no cliff near

LATE_WINDOWS = 6.0  # a window spans at least this many times the loop's longest lateness,
YOUNG_LATE_WINDOWS = 2.0  # ... a first climb's doubling this many (it must read a clear gain)
NOISE = 0.15  # the two halves' rates apart by more than this: read on
STRETCH = 3.0  # a window is read at most this many times its length
MIN_SAMPLES = 4  # engine readings a window needs to compare its halves


def ready(tracker: Tracker, now: float, length: float) -> bool:
    """Whether a window that has run its `length` may close now."""
    counted = now - tracker.counting_from
    if counted < (YOUNG_LATE_WINDOWS if tracker.young else LATE_WINDOWS) * tracker.late:
        return False
    return counted >= STRETCH * length or tracker.young or steady(tracker) or _below_best(tracker)


def steady(tracker: Tracker) -> bool:
    """The window's rate in its first half and its second agree within NOISE."""
    samples = tracker.samples
    if len(samples) < MIN_SAMPLES:
        return True
    middle = len(samples) // 2
    halves = [_rate(samples[0], samples[middle]), _rate(samples[middle], samples[-1])]
    return abs(halves[0] - halves[1]) <= NOISE * max(halves)


def _below_best(tracker: Tracker) -> bool:
    """The rate so far is under the best level's: it will not pay, however it ends (a
    level past a cliff reads lower the longer it runs: read no longer than needed)."""
    rate, best = tracker.rate_so_far(), tracker.level.best_rate
    return rate is not None and rate < best


def _rate(a: tuple[float, float], b: tuple[float, float]) -> float:
    return (b[1] - a[1]) / (b[0] - a[0]) if b[0] > a[0] else 0.0


def doubles(tracker: Tracker) -> bool:
    """Measured by its streams, a first climb's level whose rate so far beats the last
    one's by CLEAR_GAIN: decided on MIN_EVENTS_DOUBLING events a stream (every window below
    the knee is output lost). A smaller gain waits for MIN_EVENTS: the next step is small,
    and judged against this window's rate, read the same way."""
    level, rate = tracker.level, tracker.rate_so_far()
    if not tracker.young or level.best_rate <= 0 or rate is None:
        return False
    return clear_gain(level, rate)


def prefilling(tracker: Tracker, now: float) -> bool:
    """Measured by its streams: a new level's requests still wait for their first token
    (a step up has them prefilled first, the batch stalled meanwhile): the window starts
    counting once most are decoding, or after SETTLE_FIRST of a request's time (two
    MIN_WINDOWs before the first answer gives one)."""
    server = tracker.server
    if not tracker.source.by_stream or tracker.busy:
        return False
    if now - tracker.started >= max(2 * MIN_WINDOW, SETTLE_FIRST * server.stats.latency_ewma):
        return False
    return len(server.waiting) > max(1.0, FIRST_SHARE * server.limit)


def clearly_worse(tracker: Tracker) -> bool:
    """Under half the best level's rate so far (or, at a level just backed off to on
    preemptions, half what the level above read): a level past a CPU engine's cliff, or
    one still past a KV cache's, is left without waiting out its slow steps."""
    level, rate = tracker.level, tracker.rate_so_far()
    best = level.best_rate or level.above_rate
    return rate is not None and best > 0 and rate < WORSE * best


def clearly_better(tracker: Tracker, now: float) -> bool:
    """Measured by its answers alone, a climbing level whose rate so far, over at least
    MIN_ANSWERS of them, beats the last level's by CLEAR_GAIN: decided without waiting out
    the window (the first answers after a step up were mostly sent below it, so a rate
    read this early is, if anything, low; a whole window would be a request's time)."""
    level, stats = tracker.level, tracker.server.stats
    if tracker.first is not None or not tracker.young or level.best_rate <= 0:
        return False
    if stats.completed - tracker.answers_at < MIN_ANSWERS or now <= tracker.counting_from:
        return False
    rate = (stats.completion_tokens - tracker.tokens_at) / (now - tracker.counting_from)
    return clear_gain(level, rate)


def room_in_cache(tracker: Tracker) -> bool:
    """A step up far under what the engine's stated KV cache holds (`kv_fit`), with no
    queue in the engine at its last reading: no cache fills as its requests grow, so a young
    window reads it as well as an aged one. (An engine that queues is full of something
    else, its running limit: its steps are read aged, long enough to tell a gain from noise.)"""
    level, last = tracker.level, tracker.last
    if not level.climbing or level.ageing or (tracker.kv_tokens is None and last is None):
        return False
    if last is not None and last.waiting and last.waiting > QUEUE_SHARE * (last.running or 0):
        return False
    stated = tracker.kv_tokens or (tracker.last.kv_tokens if tracker.last else None)
    fit = kv_fit(stated, tracker.server.stats)
    return fit is not None and level.limit <= CACHE_ROOM * fit


def length(tracker: Tracker) -> float:
    latency = tracker.server.stats.latency_ewma
    if tracker.first is None:
        length = max(MIN_WINDOW, WINDOW_ANSWERS * latency)
    elif tracker.young:
        return max(MIN_WINDOW_CLIMB, WINDOW_CLIMB * latency)
    else:
        length = max(MIN_WINDOW, WINDOW_ENGINE * latency)
    return length if tracker.young else max(length, MIN_AGED_WINDOW, AGED_WINDOW * latency)
