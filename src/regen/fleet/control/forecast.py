"""How much longer a request will take: each server's measured token rate (per request), and
the lengths of this run's recent answers, so the prediction follows the model actually
served (a thinking model's long tail included) rather than a guess.

A request's length is predicted at a high quantile of the answers longer than what it has
produced so far: in the end game the fleet waits for its slowest request, so what matters
is how long a request may still run, not how long it runs on average.
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import Any

from regen.fleet.server import Server
from regen.fleet.stream_pace import longest_pause
from regen.fleet.stream_progress import Progress

QUANTILE = 0.9  # the length a request is predicted to reach, among answers at least as long
KEEP = 2048  # recent answer lengths kept
MIN_ANSWERS = 8  # fewer than this (per server, or in all) and there is no prediction
SILENT_READS = 2.0  # a stream silent this many times its longest read pause: stalled


class Forecast:
    def __init__(self, keep: int = KEEP) -> None:
        self._recent: deque[int] = deque(maxlen=keep)
        self._sorted: list[int] = []
        self._stale = False
        self.answers = 0  # requests answered this session (the copy budget counts them)

    def answered(self, data: Any) -> None:
        """Note an answer's length (its `usage.completion_tokens`, when it gives one)."""
        self.answers += 1
        try:
            tokens = data["usage"]["completion_tokens"]
        except (KeyError, TypeError):
            return
        if isinstance(tokens, int) and tokens > 0:
            self._recent.append(tokens)
            self._stale = True

    def length_above(self, produced: float) -> float | None:
        """The QUANTILE-th length among recent answers longer than `produced` tokens (None:
        too few answers, or none that long: no prediction)."""
        if self._stale:
            self._sorted = sorted(self._recent)
            self._stale = False
        lengths = self._sorted
        if len(lengths) < MIN_ANSWERS:
            return None
        first = bisect.bisect_right(lengths, produced)
        above = len(lengths) - first
        if above == 0:
            return None
        return float(lengths[first + min(above - 1, int(QUANTILE * above))])

    @staticmethod
    def rate(server: Server) -> float | None:
        """Tokens per second of one request on `server`, over its answers so far."""
        stats = server.stats
        if stats.completed < MIN_ANSWERS or stats.latency_sum <= 0:
            return None
        return stats.completion_tokens / stats.latency_sum or None

    def predict(
        self, server: Server, progress: Progress, elapsed: float, faster: float, now: float
    ) -> tuple[float, float] | None:
        """For a request `elapsed` s on `server`, its stream's `progress`: the seconds it is
        predicted to have left, and those a fresh copy at `faster` tok/s would take (None:
        no prediction). A stream silent for SILENT_READS of its longest read pauses (a read
        normally brings data far sooner) is taken for stalled."""
        stall = server.timeouts.stall
        if Forecast.stalled(server, progress, now):
            silent = progress.silent_for(now) or 0.0
            return self.stalled_left_and_redo(progress.events, silent, stall, faster)
        rate = Forecast.rate(server)
        return self.left_and_redo(elapsed, rate, faster) if rate else None

    @staticmethod
    def stalled(server: Server, progress: Progress, now: float) -> bool:
        """Whether a stream is taken for stalled: silent for SILENT_READS of its longest read
        pauses after its first tokens (a read normally brings data far sooner)."""
        silent = progress.silent_for(now)
        return silent is not None and silent >= stalled_after(server.timeouts.stall)

    def left_and_redo(
        self, elapsed: float, rate: float, faster: float
    ) -> tuple[float, float] | None:
        """For a request `elapsed` s into its answer at `rate` tok/s: the seconds it is
        predicted to have left, and the seconds a fresh copy at `faster` tok/s would take."""
        produced = elapsed * rate
        length = self.length_above(produced)
        if length is None:
            return None
        return (length - produced) / rate, length / faster

    def stalled_left_and_redo(
        self, produced: int, silent: float, stall: float, faster: float
    ) -> tuple[float, float] | None:
        """For a stream silent `silent` s after `produced` tokens, taken for stalled: it
        has left the rest of the stall timeout, then a whole answer sent again; a fresh
        copy at `faster` tok/s takes the whole answer (if the stream comes back to life
        first, it answers and the copy is cancelled)."""
        length = self.length_above(produced)
        if length is None:
            return None
        redo = length / faster
        return max(0.0, stall - silent) + redo, redo


def stalled_after(stall: float) -> float:
    """Seconds of silence after which a stream is taken for stalled, under a stall timeout
    of `stall`: SILENT_READS of its longest read pauses."""
    return SILENT_READS * longest_pause(stall)
