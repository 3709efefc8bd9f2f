"""How many requests to keep in flight on one server: the decision, as a pure function.

A batch job wants the most output tokens per second, not the lowest latency. An engine's
output rate rises with its running batch until the batch stops growing (its max running
requests, or its KV cache full) and then flattens, or falls once requests are preempted
and recomputed. The verdict is always what a level pays: its output rate against the level
below's. What an engine shows of its state (a waiting queue, a KV cache gauge, or no
/metrics at all) is a hint that shapes the steps, never the verdict: an engine regen has
not met may queue requests for their turn in a step's token budget and still gain output
through that queue (vLLM's CPU build does). So, one measurement window at a time:

- climb while the rate rises: by x2 while each step gains a lot, by x1.25 near the top
  (and always, once a top was found: a later climb is a probe from it); a step counts when
  it gains GAIN, or QUEUED_GAIN where the engine's queue stayed all window long (a hint that
  it is full: a step that pays 15% is still taken, by doublings);
  when the very first step up does not pay, the start itself may be past the top (a CPU
  engine, whose output falls once its batch outgrows its cores): halve while that pays;
  where the engine states its KV cache size, the first climb jumps to about what it holds
  (`kv_fit`: its tokens over the mean request's) after two steps up that paid, the last a
  doubling that nearly doubled the output, so a GPU's knee is reached in a few windows;
- a level whose output fell by CLIFF or more from the level below is past a cliff: back at
  once, and no higher than it for a while (`ceiling`);
- hold at the best level once a step brings too little (after a doubling that read as
  much, not less, halfway between the two: the top is between them), and probe now and
  then above it (shorter answers fit more) and below it (kept if it pays as much: past a
  cliff, each probe below pays, and the level walks back); a held level with a queue in the engine
  tries what runs for one window, and stays unless the queue paid QUEUED_GAIN more;
- back off on what only a full server does: preemptions once they cost output (back to the
  best level below; while the output holds up, the level stays but climbs no higher), and
  refusals before the first token (429/503, timeouts) that are REFUSED_SHARE of MIN_ASKED
  requests or more: x0.5 for a window, kept (and no higher for a while) when it pays about
  as much, else back up, the refusals borne there a while (a fault rate of their own, or a
  burst that passed, costs less than half the level). An engine's abort, a 5xx, a broken
  stream or an error after the first tokens fails one request, not the level.

A window in which the server did not have `limit` requests in flight most of the time
(the run is ending, the server just came back, a retry storm elsewhere) decides nothing:
a slow or recovering server is never taken for a full one, and a fall in rate alone never
lowers a held level. The window is measured by `tuning.py`; nothing here does I/O.
"""

from __future__ import annotations

import math
from dataclasses import replace

from regen.fleet.control.backoff import (
    BUSY,
    CEILING_WINDOWS,
    GAIN,
    age_ceiling,
    preempted,
    refusals,
    refusals_tried,
    refused,
)
from regen.fleet.control.level import START, Level, Window, start

__all__ = ["CEILING_WINDOWS", "START", "Level", "Window", "decide", "start"]

QUEUED_GAIN = 0.1  # ... or this much with a queue in the engine (a step paying 15% is taken)
CLIFF = 0.25  # a step up that lost this much: past a cliff, a ceiling at once (a window
# can read 10-20% low on a busy machine or a CPU engine: a plain plateau for those)
BIG_GAIN = 0.3  # a step that brought this much: the next one doubles
CLEAR_GAIN = 0.6  # ... read in a young window (tuning.py), this much, else it is read again
# once its requests have aged: a doubling still far below the knee nearly doubles the output
# at once, while one past a KV cache pays only as its requests grow (and lose it then)
JUMP_GAIN = 0.7  # a doubling that brought this much (each request kept most of its speed:
# the batch is still free, as on a GPU far below its knee) may jump to the stated cache
KEPT = 0.95  # a step up is taken only from a window in which the client kept this share of
# its level in flight (a window under BUSY decides nothing at all)
QUEUE_SHARE = 0.1  # an engine queue beyond this share of its running batch: full
PROBE_EVERY = 3  # windows held before probing above the best level again (cheap: a probe
# past the knee only queues a few requests in the engine, or preempts a few)
LOWER_LOSS = 0.0  # a probe below a held level is kept when it loses no more than this: as
# much output for fewer requests (past a cliff, where output falls as the level rises, each
# probe below pays, and the level steps back down to the top); with a tolerance, against
# the GAIN a step up needs, noisy windows would walk a gentle rise (+3% a step) down
JUMP = 8  # the most one step multiplies the level by
QUADRUPLE_EFF = 0.9  # a first climb's step whose output grew as level**this (or faster),
# read young and after a doubling, is followed by x4: far below the knee, each window spent
# there is output lost (a doubling that gained 87%, or more)
FALL = 0.1  # a held level whose output fell this far under the level it was stepped up from
# (over two windows or more; twice as far in one) is past a cliff that its first, younger
# windows did not show


def decide(level: Level, window: Window) -> Level:
    """The level for the next window."""
    if window.aged:
        level = replace(level, ageing=False)
    level, full = refusals(age_ceiling(level), window)
    new = refused(level, window) if full and not level.refused_from else _decide(level, window)
    if new.first_climb and not new.climbing:
        # A top was found (a plateau, preemptions, a queue, errors): later climbs are probes
        # from it, in small steps, never jumps to the cache (one noisy window on a CPU
        # engine, whose curve jumps about, would send it far past its knee).
        new = replace(new, first_climb=False)
    return new


def _decide(level: Level, window: Window) -> Level:
    if window.preemptions and window.busy >= BUSY:
        return preempted(level, window.rate)
    if window.busy < BUSY:
        return replace(level, reason="not full")
    if level.refused_from:
        return refusals_tried(level, window.rate)
    if level.queue_from:
        return _queue_tried(level, window.rate)
    if level.down_from:
        return _lower_tried(level, window.rate)
    if level.descending:
        return _descend(level, window.rate)
    if level.climbing:
        return _climb(level, window)
    if _queue_full(window) and not level.queue_paid:
        trial = _try_what_runs(level, window, level.limit, window.rate)
        if trial is not None:
            return trial
    return _hold(replace(level, queue_paid=max(0, level.queue_paid - 1)), window.rate)


def _try_what_runs(level: Level, window: Window, held: int, rate: float) -> Level | None:
    """A queue all window long at `held` (its output: `rate`): is it worth anything? One
    window at what the engine runs; `_queue_tried` judges it. None: it runs about as many."""
    assert window.running is not None
    runs = math.ceil(window.running * (1 + QUEUE_SHARE / 2))
    if runs >= held:
        return None
    return replace(
        level,
        limit=runs,
        queue_from=held,
        best_rate=rate,
        best_limit=held,
        climbing=False,
        reason="queue",
    )


def _needed(window: Window) -> float:
    """The gain a step up must bring to count: GAIN, or QUEUED_GAIN where the engine's queue
    stayed all window (a hint that it may be full: the step must clearly pay)."""
    return QUEUED_GAIN if _queue_full(window) else GAIN


def _queue_tried(level: Level, rate: float) -> Level:
    """One window at what the engine runs, down from a held level with a queue: stay unless
    the queue clearly paid (QUEUED_GAIN, as a step up with a queue must: a noisy window is
    no reason to keep requests waiting), else back up, and leave the queue be a while."""
    if rate * (1 + QUEUED_GAIN) >= level.best_rate:
        return replace(
            level,
            best_rate=rate,
            best_limit=level.limit,
            ceiling=level.queue_from,
            ceiling_age=0,
            queue_from=0,
            held=0,
            reason="queue",
        )
    return replace(
        level,
        limit=level.queue_from,
        queue_from=0,
        queue_paid=CEILING_WINDOWS,
        held=0,
        reason="queue pays",
    )


def _queue_full(window: Window) -> bool:
    if window.waiting is None or window.running is None:
        return False
    return window.waiting > max(4.0, QUEUE_SHARE * window.running)


def clear_gain(level: Level, rate: float) -> bool:
    """Whether a climb's step paid clearly enough to be judged on a young window: as a
    doubling that brought CLEAR_GAIN (a longer step, in proportion)."""
    return _efficiency(level, rate) >= math.log2(1 + CLEAR_GAIN)


def _efficiency(level: Level, rate: float) -> float:
    """How the output grew with the level over the last step up: the exponent k of
    rate ~ level**k (1: in step with it; a doubling that gained 30% is 0.38)."""
    if not level.best_limit or level.best_rate <= 0 or level.limit <= level.best_limit:
        return 1.0
    if rate <= 0:
        return -1.0
    return math.log(rate / level.best_rate) / math.log(level.limit / level.best_limit)


def _near_edge(level: Level) -> bool:
    """Within a x1.25 step of a ceiling (far under one, steps are as anywhere)."""
    return level.ceiling is not None and level.limit * 1.25 >= level.ceiling


def _top(level: Level) -> int:
    top = level.cap if level.ceiling is None else min(level.cap, level.ceiling - 1)
    return max(1, top)


def _climb(level: Level, window: Window) -> Level:
    rate, kv_fit, queued = window.rate, window.kv_fit, _queue_full(window)
    eff = _efficiency(level, rate)
    if level.best_limit and not window.aged and not clear_gain(level, rate):
        # Not a clear gain, read before the step's requests grew: read again once they have.
        return replace(level, ageing=True, reason="ageing")
    if level.best_limit and rate < level.best_rate * (1 + _needed(window)):
        if not level.climbed and level.best_limit > 1 and level.ceiling is None:
            # The first step up did not pay: is the start past the top? Try half of it.
            half = max(1, level.best_limit // 2)
            return replace(level, limit=half, climbing=False, descending=True, reason="below")
        if rate < level.best_rate * (1 - CLIFF) and level.limit > level.best_limit:
            # Past a cliff: back at once, and probe no higher than this for a while.
            return replace(
                level,
                limit=level.best_limit,
                climbing=False,
                held=0,
                ceiling=level.limit,
                ceiling_age=0,
                probe_down=True,
                reason="cliff",
            )
        if queued and not level.queue_paid:  # a top with a queue: does the queue pay?
            trial = _try_what_runs(level, window, level.best_limit, level.best_rate)
            if trial is not None:
                return trial
        if level.step >= 2.0 and rate >= level.best_rate * (1 - GAIN):
            # A doubling that read as much, not less: the top is between the two (and the
            # level below was read in a short window, which reads high): hold halfway,
            # geometrically, and probe above it first.
            middle = math.ceil(math.sqrt(level.best_limit * level.limit))
            return replace(level, limit=middle, climbing=False, held=0, reason="plateau")
        # The last step did not pay: back to the best level, and hold there (its next probe
        # goes below it: is the level below as good?).
        return replace(
            level, limit=level.best_limit, climbing=False, held=0, probe_down=True, reason="plateau"
        )
    if window.busy < KEPT:
        # It paid, but the client kept its level in flight only most of the time (sends
        # behind, a starved loop): a higher level is one it would keep less still.
        return replace(level, reason="client behind")
    gained = rate / level.best_rate - 1 if level.best_rate else 1.0
    # Doublings while each gains a lot; then x1.25, and always past a top. With a queue in
    # the engine, doublings while each pays QUEUED_GAIN: the engine admits what fits and the
    # rest waits (no preemptions to fear), and a smaller step's gain would be lost in noise.
    doubles = level.step >= 2.0 and eff >= math.log2(1 + (QUEUED_GAIN if queued else BIG_GAIN))
    if level.step > 2.0 and not doubles:
        # A long step that paid less than a doubling's worth: the top is within it.
        middle = math.ceil(math.sqrt(level.best_limit * level.limit))
        return replace(level, limit=middle, climbing=False, held=0, reason="plateau")
    # Past a first climb's doublings, a step as long as the gain says is worth the risk:
    # the output's curve bends, so the next step gains less than this one did.
    step = 2.0 if doubles and level.first_climb else 1 + min(0.25, max(0.05, 2 * gained))
    if (
        step == 2.0
        and not window.aged
        and level.best_limit
        and level.step >= 2.0
        and eff >= QUADRUPLE_EFF
    ):
        step = 4.0  # the output grew with the level, step for step: far below any knee
    if _near_edge(level):
        step = min(step, 1.05)  # near a known edge: small steps
    higher = max(level.limit + 1, math.ceil(level.limit * step))
    if (
        level.first_climb
        and level.climbed
        and level.step >= 2.0
        and gained >= JUMP_GAIN
        and (kv_fit and kv_fit > higher)
    ):
        # Two steps up that paid, the last a doubling that nearly doubled the output, and the
        # cache holds far more: straight towards what it holds (at most JUMP times up); the
        # climb goes on from there. Never once a top was found, nor on a CPU engine's gains
        # (vLLM's CPU build: 16 to 32 in flight can read +70% when the first window held the
        # first prompts' prefill, and 150 runs at a quarter of 16's rate).
        higher = min(kv_fit, level.limit * JUMP)
    higher = min(_top(level), higher)
    climbed = level.climbed or level.best_limit > 0  # this window's level beat the last one
    best = replace(
        level,
        best_rate=rate,
        best_limit=level.limit,
        step=step,
        climbed=climbed,
        below_rate=level.best_rate if level.best_limit < level.limit else 0.0,
        below_limit=level.best_limit if level.best_limit < level.limit else 0,
    )
    if higher <= level.limit:
        return replace(best, climbing=False, held=0, probe_down=True, reason="at cap")
    return replace(best, limit=higher, reason="climbing")


def _descend(level: Level, rate: float) -> Level:
    """Below a start that was past the top: halve again while the output rises by GAIN; else
    back to the best level seen, and hold (probes above it follow as usual)."""
    if rate < level.best_rate * (1 + GAIN):
        return replace(
            level, limit=level.best_limit, descending=False, climbed=True, held=0, reason="plateau"
        )
    best = replace(level, best_rate=rate, best_limit=level.limit)
    if level.limit > 1:
        return replace(best, limit=level.limit // 2, reason="below")
    return replace(best, descending=False, climbed=True, held=0, reason="holding")  # 1 is best


def _hold(level: Level, rate: float) -> Level:
    # The held level's rate is the mean of the windows since it was last taken up: a probe
    # is judged against the present (a server that slowed is not compared with its past),
    # and against more than one noisy window.
    held = level.held + 1
    mean = rate if level.held == 0 else level.best_rate + (rate - level.best_rate) / held
    fell = (
        mean < level.below_rate * (1 - FALL)
        if held >= 2
        else rate < level.below_rate * (1 - 2 * FALL)
    )
    if level.below_limit and fell:
        # It paid when it was stepped up to, and no longer does: past a cliff after all.
        return replace(
            level,
            limit=level.below_limit,
            best_rate=level.below_rate,
            best_limit=level.below_limit,
            below_limit=0,
            below_rate=0.0,
            ceiling=level.limit,
            ceiling_age=0,
            held=0,
            probe_down=False,
            reason="fell under the level below",
        )
    level = replace(level, best_rate=mean, best_limit=level.limit, held=held)
    if held < PROBE_EVERY:
        return replace(level, reason="holding")
    step = 1.05 if _near_edge(level) else 1.25  # near a known edge: small probes
    higher = min(_top(level), max(level.limit + 1, math.ceil(level.limit * step)))
    lower = max(1, math.floor(level.limit / 1.25))
    top = higher <= level.limit  # at the cap or a ceiling: only below, and less often
    if lower < level.limit and (level.probe_down or (top and held >= 4 * PROBE_EVERY)):
        return replace(level, limit=lower, down_from=level.limit, held=0, reason="probe below")
    if higher > level.limit:
        return replace(level, limit=higher, climbing=True, held=0, step=step, reason="probe")
    return replace(level, reason="holding")


def _lower_tried(level: Level, rate: float) -> Level:
    """One window below a held level (whose rate is best_rate): kept when it pays as much
    (LOWER_LOSS; the held level is then a ceiling for a while, and the next probe goes lower
    still), else back up, and the next probe goes above."""
    if rate >= level.best_rate * (1 - LOWER_LOSS):
        return replace(
            level,
            best_rate=rate,
            best_limit=level.limit,
            ceiling=level.down_from,
            ceiling_age=0,
            down_from=0,
            held=0,
            reason="lower pays as much",
        )
    return replace(
        level,
        limit=level.down_from,
        down_from=0,
        held=0,
        probe_down=False,
        reason="lower pays less",
    )
