"""How many requests to keep in flight on one server: the decision, as a pure function.

A batch job wants the most output tokens per second, not the lowest latency. An engine's
output rate rises with its running batch until the batch stops growing (its max running
requests, or its KV cache full) and then flattens, or falls once requests are preempted
and recomputed. The verdict is always what a level pays: its output rate against the level
below's. What an engine shows of its state (a waiting queue, a KV cache gauge, or no
/metrics at all) is a hint that shapes the steps, never the verdict: an engine regen has
not met may queue requests for their turn in a step's token budget and still gain output
through that queue (vLLM's CPU build does). So, one measurement window at a time:

- climb while the rate rises (climb.py): a first climb doubles while each doubling clearly
  pays, read young (right after the step), x4 after one that nearly doubled the output,
  or a jump to what a stated KV cache holds (`kv_fit`); a step that paid less than
  CLEAR_GAIN a doubling is read again once its requests have aged (`Level.ageing`): a KV
  cache fills as they grow, and a level past it pays only until then. Later steps are
  x1.25 (x1.05 near a known edge), and always judged aged. A step counts when it
  gains GAIN, or QUEUED_GAIN where a queue stayed all window long (queue.py: the engine's
  gauge, or the client's streams without a first token); a step up is taken only from a
  window in which the client kept its level in flight (KEPT); when the very first step up
  does not pay, the start itself may be past the top (a CPU engine): halve while that pays;
- a level whose output fell by CLIFF or more from the level below is past a cliff (read
  twice where FEW_ENDED requests ended in the window: a CPU engine's prefill): back at
  once, no higher than it for a while (`ceiling`), and the next probe goes below (the level
  it came back to was read young; read aged and a quarter lower, it backs off halfway);
- hold at the best level once a step brings too little (after a doubling that read as
  much, not less, halfway between the two: the top is between them; a best level read
  young or in a short window is first read again in a full one), and probe now and
  then above it (shorter answers fit more) and below it (kept if it pays as much: past a
  cliff, each probe below pays, and the level walks back, on down while each pays clearly
  more); a held level that pays FALL less
  than the level it was stepped up from goes back to it; a held level with a queue tries
  what runs for one window, and stays unless the queue paid QUEUED_GAIN more;
- back off on what only a full server does: preemptions once they cost output (back to the
  best level below; while the output holds up, the level stays but climbs no higher; a
  climb's long step that paid is read again aged first: its own prefills preempt; a level
  backed off to whose first window, preempted too, reads under the level above by CLIFF
  backs off again, its window closed once it reads under half of it), and
  refusals before the first token (429/503, timeouts) that are REFUSED_SHARE of MIN_ASKED
  requests or more: x0.5 for a window, kept (and no higher for a while) when it pays about
  as much as the refused level did, else back up, the refusals borne there a while (a fault
  rate of their own, or a burst that passed, costs less than half the level). An engine's
  abort, a 5xx, a broken stream or an error after the first tokens fails one request, not
  the level.

A held level also tries, once, the best level of another server of the fleet whose output
there is clearly higher, and climbs no higher than a cliff an alike server met (peers.py,
applied by tuning.py).

A resumed run's level (the last session's) is held, not climbed from: it was found once.
A window in which the server did not have `limit` requests in flight most of the time
(the run is ending, the server just came back, a retry storm elsewhere, a client too busy
to send) decides nothing: a slow or recovering server is never taken for a full one, and a
fall in rate alone never lowers a held level. The window is measured by `tuning.py` (how
long, window.py); nothing here does I/O.
"""

from __future__ import annotations

import math
from dataclasses import replace

from regen.fleet.control.backoff import (
    BUSY,
    CEILING_WINDOWS,
    age_ceiling,
    back_off,
    preempted,
    refusals,
    refusals_tried,
    refused,
)
from regen.fleet.control.climb import (
    BIG_GAIN,
    CLEAR_GAIN,
    CLIFF,
    JUMP,
    clear_gain,
    climb,
    descend,
    near_edge,
    top,
)
from regen.fleet.control.level import START, Level, Window, start
from regen.fleet.control.queue import queue_full, queue_tried, try_what_runs

__all__ = [
    "BIG_GAIN",
    "CEILING_WINDOWS",
    "CLEAR_GAIN",
    "JUMP",
    "START",
    "Level",
    "Window",
    "clear_gain",
    "decide",
    "start",
]

PROBE_EVERY = 3  # windows held before probing above the best level again (cheap: a probe
# past the knee only queues a few requests in the engine, or preempts a few)
LOWER_LOSS = -0.02  # a probe below a held level is kept when it loses no more than this: as
# much output for fewer requests (past a cliff, where output falls as the level rises, each
# probe below pays, and the level steps back down to the top); with a tolerance, against
# the GAIN a step up needs, noisy windows would walk a gentle rise (+3% a step) down
LOWER_CLEAR = 0.08  # ... and the next probe goes lower still only after one that paid this
# much more (past a cliff, each probe below pays clearly more); one that paid about as much
# probes above next: on a flat, noisy curve (a CPU engine, whose windows read 10% apart)
# probes below kept by noise alone walked the real vLLM server from 64 down to 16
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
        return preempted(level, window.rate, window.aged)
    if window.busy < BUSY:
        return replace(level, reason="not full")
    if level.refused_from:
        return refusals_tried(level, window.rate)
    if level.queue_from:
        return queue_tried(level, window.rate)
    if level.down_from:
        return _lower_tried(level, window.rate)
    if level.descending:
        return descend(level, window.rate)
    if level.climbing:
        return climb(level, window)
    if queue_full(window) and not level.queue_paid:
        trial = try_what_runs(level, window, level.limit, window.rate)
        if trial is not None:
            return trial
    return _hold(replace(level, queue_paid=max(0, level.queue_paid - 1)), window.rate)


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
            cliff_at=level.limit,
            held=0,
            probe_down=False,
            reason="fell under the level below",
        )
    if level.held == 0 and level.best_unsure and rate < level.best_rate * (1 - CLIFF):
        # Read young when it was climbed to, and far less now its requests have aged: a
        # cache that fills as they grow, past its edge too. Halfway down, geometrically.
        lower = math.ceil(math.sqrt(level.below_limit * level.limit)) if level.below_limit else 0
        down = back_off(level, lower or level.limit // 2, "cliff")
        return replace(
            down,
            cliff_at=level.limit,
            probe_down=False,
            best_unsure=False,
            below_limit=0,
            below_rate=0.0,
        )
    level = replace(level, best_rate=mean, best_limit=level.limit, held=held, best_unsure=False)
    # Back from a cliff, the next probe goes below at once: the level it came back to was
    # read young (a cache that fills as requests grow may be past its edge as well).
    after_cliff = level.probe_down and level.ceiling is not None
    if held < (1 if after_cliff else PROBE_EVERY):
        return replace(level, reason="holding")
    step = 1.05 if near_edge(level) else 1.25  # near a known edge: small probes
    higher = min(top(level), max(level.limit + 1, math.ceil(level.limit * step)))
    lower = max(1, math.floor(level.limit / 1.25))
    at_top = higher <= level.limit  # at the cap or a ceiling: only below, and less often
    if lower < level.limit and (level.probe_down or (at_top and held >= 4 * PROBE_EVERY)):
        return replace(level, limit=lower, down_from=level.limit, held=0, reason="probe below")
    if higher > level.limit:
        return replace(level, limit=higher, climbing=True, held=0, step=step, reason="probe")
    return replace(level, reason="holding")


def _lower_tried(level: Level, rate: float) -> Level:
    """One window below a held level (whose rate is best_rate): kept when it pays as much
    (LOWER_LOSS; the held level is then a ceiling for a while, and the next probe goes lower
    still where this one paid LOWER_CLEAR more, else above), else back up, and the next
    probe goes above."""
    if rate >= level.best_rate * (1 - LOWER_LOSS):
        return replace(
            level,
            probe_down=level.probe_down and rate >= level.best_rate * (1 + LOWER_CLEAR),
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
