"""The drain at the end of a batch: from the moment every item is sent until the last answer
is in, how long it took and how much of the fleet's capacity sat idle meanwhile."""

from __future__ import annotations

from typing import Any


class DrainMeter:
    def __init__(self) -> None:
        self.started: float | None = None
        self.ended: float | None = None
        self._capacity = 0
        self._in_flight = 0
        self._busy = 0.0  # slot-seconds with a request (or a copy) on them
        self._last = 0.0

    def begin(self, now: float, capacity: int, in_flight: int) -> None:
        self.started = self._last = now
        self._capacity, self._in_flight = capacity, in_flight
        if in_flight == 0:
            self.ended = now

    def tick(self, now: float, in_flight: int) -> None:
        """Called whenever a slot is taken or freed during the drain."""
        if self.started is None or self.ended is not None:
            return
        self._busy += self._in_flight * (now - self._last)
        self._last, self._in_flight = now, in_flight
        if in_flight == 0:
            self.ended = now

    def snapshot(self, now: float) -> dict[str, Any] | None:
        """None before the drain; `idle_ratio` is the share of slot-seconds with nothing on
        them (so far, while it lasts)."""
        if self.started is None:
            return None
        end = self.ended if self.ended is not None else now
        span = end - self.started
        busy = self._busy + (
            0.0 if self.ended is not None else self._in_flight * (now - self._last)
        )
        capacity = self._capacity * span
        idle = 1.0 - busy / capacity if capacity > 0 else 0.0
        return {
            "seconds": round(span, 3),
            "idle_ratio": round(min(1.0, max(0.0, idle)), 4),
            "finished": self.ended is not None,
        }
