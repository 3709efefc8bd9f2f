"""When a measurement window may close (tuning.py), beyond its length: not before its
reading is sure enough on a busy client, nor while its rate still moves.

- A busy client (two CPU hogs beside it, a loaded CI) wakes up late: the events and answers
  it counts come in bursts, and a window's count is off by what waited unread at either end
  of it, about the loop's lateness times the rate. So a window spans at least LATE_WINDOWS
  times the longest lateness in it (a tenth of a second late: a window of 0.6 s or more;
  1.5 s late: 9 s); a first climb's doubling, which must read a clear gain, two. (A client so busy that it cannot keep
  its level in flight reads `busy` under concurrency.BUSY: no verdict at all.)
- A level's output still moving within its window (the first and the second half of it
  apart by more than NOISE: its requests still ageing, a cache filling, a noisy reading) is
  read longer, up to STRETCH times the window, and judged on the whole then; unless it is
  already under the best level's (it will not pay: past a cliff, longer only costs more).
"""

from __future__ import annotations

from regen.fleet.control.tracker import Tracker

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
