"""When a server's level steps back, and stays back: refusals before the first token judged
over enough requests, preemptions once they cost output, and the ceiling either leaves for a
while (the rules are in concurrency.py's docstring; this is their arithmetic).
"""

from __future__ import annotations

import math
from dataclasses import replace

from regen.fleet.control.level import Level, Window
from regen.fleet.health import MIN_ASKED, MIN_REFUSED, REFUSED_SHARE

GAIN = 0.04  # a step up must bring at least this much more output to count
CLIFF = 0.25  # a step up that lost this much: past a cliff, a ceiling at once (a window
# can read 10-20% low on a busy machine or a CPU engine: a plain plateau for those)
BUSY = 0.85  # a window counts when in-flight averaged at least this share of the limit
# Refusals are judged over MIN_ASKED requests, windows tallied up to it: a climbing window on
# a busy client sends a handful, and one 503 among 8 is no full server.
CEILING_WINDOWS = 24  # windows a ceiling (preemptions, errors, queue) lasts


def refusals(level: Level, window: Window) -> tuple[Level, bool]:
    """Refusals before the first token (429/503, a timeout) tallied across windows; once
    MIN_ASKED requests were sent, whether they were REFUSED_SHARE of them (a full server: it
    refuses work it has no room for; a failed request is no refusal: Window.errors)."""
    refused, asked = level.refused + window.errors, level.asked + window.requests
    borne = max(0, level.refusals_borne - 1)
    if asked < MIN_ASKED:
        return replace(level, refused=refused, asked=asked, refusals_borne=borne), False
    full = refused >= max(MIN_REFUSED, REFUSED_SHARE * asked)
    return replace(level, refused=0, asked=0, refusals_borne=borne), full and not borne


def refused(level: Level, window: Window) -> Level:
    """A full server's share of refusals: half the level for a window (`refusals_tried`
    judges it). Its rate is the held level's where it was held, else this window's."""
    held = level.best_rate if level.best_limit == level.limit and not level.climbing else 0.0
    return replace(
        level,
        limit=max(1, math.floor(level.limit * 0.5)),
        refused_from=level.limit,
        # (a window not full paid at least its rate: half must pay as much to be kept)
        refused_rate=max(held, window.rate),
        climbing=False,
        descending=False,
        queue_from=0,
        down_from=0,
        held=0,
        reason="refused",
    )


def refusals_tried(level: Level, rate: float) -> Level:
    """One window at half a level refused at. Kept when it pays about as much (the refusals
    were a full server's back-pressure): no higher for a while. Else the refusals cost less
    than what the level below loses (a fault rate of their own, a burst that passed): back
    up, and refusals are borne there for CEILING_WINDOWS."""
    if rate >= level.refused_rate * (1 - GAIN):
        return replace(
            level,
            best_rate=rate,
            best_limit=level.limit,
            ceiling=level.refused_from,
            ceiling_age=0,
            refused_from=0,
            held=0,
            reason="refused",
        )
    return replace(
        level,
        limit=level.refused_from,
        best_rate=level.refused_rate,
        best_limit=level.refused_from,
        refused_from=0,
        refusals_borne=CEILING_WINDOWS,
        held=0,
        reason="refusals cost less",
    )


def preempted(level: Level, rate: float, aged: bool = True) -> Level:
    """The KV cache is full: no higher than this. The level stays while its output holds up
    (a recompute can cost less than a smaller batch); it goes back to the best level below
    once its output falls under that level's, or down by x0.85 when none is known. A climb's
    long step goes halfway back; read young, once aged, if it paid GAIN."""
    level = replace(level, queue_from=0, down_from=0, refused_from=0)  # a trial is over
    long_step = level.climbing and level.limit > 1.3 * level.best_limit > 0
    if long_step and not aged and rate >= level.best_rate * (1 + GAIN):
        # It paid, read before its requests grew: the preemptions may be the step's own
        # (its new requests all prefilled at once), not a cache too small for the level.
        return replace(level, ageing=True, reason="ageing")
    if long_step:
        # A long step crossed the cache's edge: try halfway (geometrically), below it.
        middle = math.ceil(math.sqrt(level.best_limit * level.limit))
        return replace(
            level,
            limit=middle,
            ceiling=level.limit,
            ceiling_age=0,
            descending=False,
            reason="preemptions",
        )
    if level.best_rate <= 0 < level.above_rate and rate < level.above_rate * (1 - CLIFF):
        # The first window at a level backed off to, preempted as the one above it was, and
        # far less output than there: still past a cliff (draw 171 of the family bench held
        # 512 for two minutes at a third of 640's output): on down.
        return back_off(level, math.floor(level.limit * 0.85), "preemptions", above_rate=rate)
    same = level.best_limit == level.limit  # noise only: within GAIN of itself
    if rate >= level.best_rate * (1 - GAIN if same else 1):
        best = max(rate, level.best_rate) if same else rate
        return replace(
            level,
            best_rate=best,
            best_limit=level.limit,
            ceiling=level.limit + 1,
            ceiling_age=0,
            climbing=False,
            descending=False,
            held=0,
            above_rate=0.0,
            reason="preemptions: holding",
        )
    below = level.best_limit if 0 < level.best_limit < level.limit else 0
    lower = below or math.floor(level.limit * 0.85)
    return back_off(level, lower, "preemptions", above_rate=rate)


def back_off(level: Level, lower: int, why: str, above_rate: float = 0.0) -> Level:
    """Down to `lower`, no higher than this level for a while; nothing is known of `lower`
    yet (`above_rate`: what this level read, where its first window there is judged on it)."""
    lower = max(1, min(lower, level.limit - 1 if level.limit > 1 else 1))
    return replace(
        level,
        above_rate=above_rate,
        queue_from=0,
        down_from=0,
        refused=0,
        asked=0,
        refused_from=0,
        limit=lower,
        best_rate=0.0,
        best_limit=lower,
        ceiling=level.limit,
        ceiling_age=0,
        climbing=False,
        descending=False,
        held=0,
        reason=why,
    )


def age_ceiling(level: Level) -> Level:
    if level.ceiling is None:
        return level
    if level.ceiling_age + 1 >= CEILING_WINDOWS:
        return replace(level, ceiling=None, ceiling_age=0)
    return replace(level, ceiling_age=level.ceiling_age + 1)
