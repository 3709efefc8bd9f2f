"""A queue in the engine (its own gauge, or streams the client sees wait for their first
token): whether it pays. A step up with a queue all window long must pay QUEUED_GAIN; a top
with one tries, for one window, what the engine runs, and stays there unless the queue paid
(concurrency.py's docstring has the rules; this is their arithmetic)."""

from __future__ import annotations

import math
from dataclasses import replace

from regen.fleet.control.backoff import CEILING_WINDOWS, GAIN
from regen.fleet.control.level import Level, Window

QUEUED_GAIN = 0.1  # ... or this much with a queue in the engine (a step paying 15% is taken)
QUEUE_SHARE = 0.1  # an engine queue beyond this share of its running batch: full


def try_what_runs(level: Level, window: Window, held: int, rate: float) -> Level | None:
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


def needed(window: Window) -> float:
    """The gain a step up must bring to count: GAIN, or QUEUED_GAIN where the engine's queue
    stayed all window (a hint that it may be full: the step must clearly pay)."""
    return QUEUED_GAIN if queue_full(window) else GAIN


def queue_tried(level: Level, rate: float) -> Level:
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


def queue_full(window: Window) -> bool:
    if window.waiting is None or window.running is None:
        return False
    return window.waiting > max(4.0, QUEUE_SHARE * window.running)
