"""Per-server circuit breaker: a server that keeps failing leaves the rotation, is probed in
the background, and comes back when it answers again."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class CircuitBreaker:
    """closed (serving) -> open after `threshold` consecutive failures -> closed again when a
    health probe succeeds. Probes back off from `probe_interval` up to `max_probe_interval`."""

    threshold: int = 3
    probe_interval: float = 1.0
    max_probe_interval: float = 15.0
    consecutive_failures: int = 0
    opened_at: float | None = None
    reason: str | None = None
    next_probe_at: float = 0.0
    trips: int = field(default=0)
    _probe_delay: float = 0.0

    @property
    def allows_requests(self) -> bool:
        return self.opened_at is None

    @property
    def state(self) -> str:
        return "healthy" if self.opened_at is None else "down"

    def record_success(self) -> None:
        self.consecutive_failures = 0

    def record_failure(self, reason: str) -> bool:
        """Count a failure; returns True when this failure opened the breaker."""
        self.consecutive_failures += 1
        self.reason = reason
        if self.opened_at is None and self.consecutive_failures >= self.threshold:
            self.trip(reason)
            return True
        return False

    def trip(self, reason: str) -> None:
        self.opened_at = time.monotonic()
        self.reason = reason
        self.trips += 1
        self._probe_delay = self.probe_interval
        self.next_probe_at = self.opened_at + self._probe_delay

    def probe_due(self, now: float) -> bool:
        return self.opened_at is not None and now >= self.next_probe_at

    def probe_failed(self, now: float) -> None:
        self._probe_delay = min(self._probe_delay * 2, self.max_probe_interval)
        self.next_probe_at = now + self._probe_delay

    def close(self) -> None:
        self.opened_at = None
        self.consecutive_failures = 0
        self.reason = None
