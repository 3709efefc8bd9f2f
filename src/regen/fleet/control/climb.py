"""Climbing to the top: a step up judged by what it paid against the level below, how
long the next step is, and the way back from a step that did not pay (a plateau, a cliff, a
start past the top). concurrency.py's docstring has the rules; this is their arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import replace

from regen.fleet.control.backoff import CLIFF, GAIN
from regen.fleet.control.level import Level, Window
from regen.fleet.control.queue import QUEUED_GAIN, needed, queue_full, try_what_runs

BIG_GAIN = 0.3  # a step that brought this much: the next one doubles
CLEAR_GAIN = 0.6  # ... read in a young window (tuning.py), this much, else it is read again
# once its requests have aged: a doubling still far below the knee nearly doubles the output
# at once, while one past a KV cache pays only as its requests grow (and lose it then)
JUMP_GAIN = 0.7  # a doubling that brought this much (each request kept most of its speed:
# the batch is still free, as on a GPU far below its knee) may jump to the stated cache
KEPT = 0.95  # a step up is taken only from a window in which the client kept this share of
# its level in flight (a window under BUSY decides nothing at all)
FEW_ENDED = 4  # a cliff read in a window in which fewer requests ended (and were replaced)
# is read again, once: a CPU engine prefilling a step's new prompts decodes next to nothing
# for seconds (the real vLLM server: 128 tok/s at 64 against 303 at 32, in a 1.8-s window
# in which 2 requests ended), while an engine past its KV cache still ends requests, slowly
JUMP = 8  # the most one step multiplies the level by
RUNNING_GROWTH = 0.1  # with a queue, a step up pays only where the running batch grew this
QUADRUPLE_EFF = 0.9  # a first climb's step whose output grew as level**this (or faster),
# read young and after a doubling, is followed by x4: far below the knee, each window spent
# there is output lost (a doubling that gained 87%, or more)


def _stuck(level: Level, window: Window) -> bool:
    """A step up with a queue all window long whose running batch did not grow with it
    (RUNNING_GROWTH): the engine runs what it ran, and the rest waits; whatever the rate
    read (a busy client's noise), the step cannot have paid."""
    before, now = level.best_running, window.running
    if not queue_full(window) or before is None or now is None or level.limit <= level.best_limit:
        return False
    return now < before * (1 + RUNNING_GROWTH)


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


def near_edge(level: Level) -> bool:
    """Within a x1.25 step of a ceiling (far under one, steps are as anywhere)."""
    return level.ceiling is not None and level.limit * 1.25 >= level.ceiling


def top(level: Level) -> int:
    top = level.cap if level.ceiling is None else min(level.cap, level.ceiling - 1)
    return max(1, top)


def climb(level: Level, window: Window) -> Level:
    rate, kv_fit, queued = window.rate, window.kv_fit, queue_full(window)
    doubted, level = level.doubted, replace(level, doubted=False)
    eff = _efficiency(level, rate)
    unclear = not window.aged and not clear_gain(level, rate)
    if level.best_limit and (unclear or (queued and window.short)):
        # Not a clear gain, read before the step's requests grew; or any step read in a short
        # window into a queue (the engine is full of something: its running limit; a busy
        # client's short window reads noise as a gain): read again in a full, aged window.
        return replace(level, ageing=True, reason="ageing")
    if level.best_limit and (
        rate < level.best_rate * (1 + needed(window)) or _stuck(level, window)
    ):
        if not level.climbed and level.best_limit > 1 and level.ceiling is None:
            # The first step up did not pay: is the start past the top? Try half of it.
            half = max(1, level.best_limit // 2)
            return replace(level, limit=half, climbing=False, descending=True, reason="below")
        if rate < level.best_rate * (1 - CLIFF) and level.limit > level.best_limit:
            if window.requests < FEW_ENDED and not doubted:
                return replace(level, doubted=True, reason="a cliff? read again")
            # Past a cliff: back at once, and probe no higher than this for a while.
            return replace(
                level,
                limit=level.best_limit,
                climbing=False,
                held=0,
                ceiling=level.limit,
                ceiling_age=0,
                cliff_at=level.limit,
                probe_down=True,
                reason="cliff",
            )
        if queued and not level.queue_paid:  # a top with a queue: does the queue pay?
            trial = try_what_runs(level, window, level.best_limit, level.best_rate)
            if trial is not None:
                return trial
        if window.aged and level.best_unsure and level.best_limit < level.limit:
            # Read aged against a level below read young (which reads high: no requests of
            # its own had ended yet, so none was being replaced), or in a climb's short
            # window (noise: the real vLLM CPU server's 2-s window at 32 read 418 tok/s, its
            # later full ones 264-302): read that one aged too, in a full window, and keep
            # the better (`concurrency._lower_tried`).
            return replace(
                level,
                limit=level.best_limit,
                down_from=level.limit,
                best_rate=rate,
                best_limit=level.limit,
                best_unsure=False,
                climbing=False,
                held=0,
                reason="read below aged",
            )
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
    # Doublings while each gains a lot; then x1.25, and always past a top. With a queue in
    # the engine, doublings while each pays QUEUED_GAIN: the engine admits what fits and the
    # rest waits (no preemptions to fear), and a smaller step's gain would be lost in noise.
    doubles = level.step >= 2.0 and eff >= math.log2(1 + (QUEUED_GAIN if queued else BIG_GAIN))
    if level.step > 2.0 and not doubles:
        # A long step that paid less than a doubling's worth: the top is within it.
        middle = math.ceil(math.sqrt(level.best_limit * level.limit))
        return replace(level, limit=middle, climbing=False, held=0, reason="plateau")
    step = 2.0 if doubles and level.first_climb else 1.25
    if (
        step == 2.0
        and not window.aged
        and level.best_limit
        and level.step >= 2.0
        and eff >= QUADRUPLE_EFF
    ):
        step = 4.0  # the output grew with the level, step for step: far below any knee
    if near_edge(level):
        step = min(step, 1.05)  # near a known edge: small steps
    higher = max(level.limit + 1, math.ceil(level.limit * step))
    if (
        level.first_climb
        and level.climbed
        and level.step >= 2.0
        and eff >= math.log2(1 + JUMP_GAIN)  # (after x4: as much a doubling)
        and not queued  # a queue: the engine is full of something else than its cache
        and (kv_fit and kv_fit > higher)
    ):
        # Two steps up that paid, the last a doubling that nearly doubled the output, and the
        # cache holds far more: straight towards what it holds (at most JUMP times up); the
        # climb goes on from there. Never once a top was found, nor on a CPU engine's gains
        # (vLLM's CPU build: 16 to 32 in flight can read +70% when the first window held the
        # first prompts' prefill, and 150 runs at a quarter of 16's rate).
        higher = min(kv_fit, level.limit * JUMP)
    higher = min(top(level), higher)
    climbed = level.climbed or level.best_limit > 0  # this window's level beat the last one
    best = replace(
        level,
        best_rate=rate,
        best_limit=level.limit,
        step=step,
        climbed=climbed,
        below_rate=level.best_rate if level.best_limit < level.limit else 0.0,
        below_limit=level.best_limit if level.best_limit < level.limit else 0,
        best_unsure=not window.aged or window.short,
        best_running=window.running,
    )
    if higher <= level.limit:
        return replace(best, climbing=False, held=0, probe_down=True, reason="at cap")
    return replace(best, limit=higher, reason="climbing")


def descend(level: Level, rate: float) -> Level:
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
