"""When a server's level steps back, and stays back: refusals before the first token judged
over enough requests, preemptions once they cost output, and the ceiling either leaves for a
while (the rules are in concurrency.py's docstring; this is their arithmetic).
"""

from __future__ import annotations

import math
from dataclasses import replace

from regen.fleet.control.level import Level, Window

GAIN = 0.04  # a step up must bring at least this much more output to count
REFUSED_SHARE = 0.15  # refusals before the first token, of the requests sent: a full server
MIN_ASKED = 32  # requests a share of refusals is judged over (windows are tallied up to it:
# a climbing window on a busy client ends a handful, and one 503 among 8 is no full server)
MIN_REFUSED = 3
CEILING_WINDOWS = 24  # windows a ceiling (preemptions, errors, queue) lasts


def refusals(level: Level, window: Window) -> tuple[Level, bool]:
    """Refusals before the first token (429/503, a timeout) tallied across windows; once
    MIN_ASKED requests were sent, whether they were REFUSED_SHARE of them (a full server: it
    refuses work it has no room for; a failed request is no refusal: Window.errors)."""
    refused, asked = level.refused + window.errors, level.asked + window.requests
    if asked < MIN_ASKED:
        return replace(level, refused=refused, asked=asked), False
    full = refused >= max(MIN_REFUSED, REFUSED_SHARE * asked)
    return replace(level, refused=0, asked=0), full


def preempted(level: Level, rate: float) -> Level:
    """The KV cache is full: no higher than this. The level stays while its output holds up
    (a recompute can cost less than a smaller batch); it goes back to the best level below
    once its output falls under that level's, or down by x0.85 when none is known."""
    level = replace(level, queue_from=0, down_from=0)  # a trial below is over: this decides
    if level.climbing and level.limit > 1.3 * level.best_limit > 0:
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
            reason="preemptions: holding",
        )
    below = level.best_limit if 0 < level.best_limit < level.limit else 0
    return back_off(level, below or math.floor(level.limit * 0.85), "preemptions")


def back_off(level: Level, lower: int, why: str) -> Level:
    lower = max(1, min(lower, level.limit - 1 if level.limit > 1 else 1))
    return replace(
        level,
        queue_from=0,
        down_from=0,
        refused=0,
        asked=0,
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
