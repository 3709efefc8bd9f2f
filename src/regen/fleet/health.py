"""Per-server health: a circuit breaker (a server that keeps failing leaves the rotation, is
probed in the background, and comes back when it answers again) and a refusal count (a
server that answers every request the same wrong way leaves for good: it is the fleet's
fault, not the prompts')."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

# A server refusing work before the first token (429/503, an in-stream error before any
# token) is full when its refusals are this share of the requests sent to it, over MIN_ASKED
# of them: one 503 in a short window, or a fault rate of a few in a hundred, is no full server.
REFUSED_SHARE = 0.15
MIN_ASKED = 32
MIN_REFUSED = 3


class ServerState(StrEnum):
    """What status and metrics show for a server (written to progress.json as the string)."""

    HEALTHY = "healthy"  # in rotation
    DOWN = "down"  # out of rotation, probed until it answers again
    REFUSED = "refused"  # out for good: it refuses every request


@dataclass
class Refusals:
    """Refusals in a row from one server (see `ServerRefused`). A success in between resets
    it: one odd answer from a load balancer must not take a good server out."""

    threshold: int = 3
    in_a_row: int = 0
    last: str | None = None  # the server's answer, for the message that stops the run
    hint: str | None = None  # the fix for that answer

    def record(self, answer: str, hint: str | None) -> bool:
        """Count a refusal; True when the server should leave the rotation."""
        self.in_a_row += 1
        self.last, self.hint = answer, hint
        return self.in_a_row >= self.threshold

    def reset(self) -> None:
        self.in_a_row = 0


@dataclass
class BackPressure:
    """Refusals before the first token among the last MIN_ASKED requests sent to a server:
    REFUSED_SHARE of them or more is a full server, and its new requests wait (rotation.py);
    fewer are failed requests, each waiting its own retry delay while the server serves."""

    refused_at: deque[int] = field(default_factory=lambda: deque(maxlen=MIN_ASKED))

    def full(self, sent: int) -> bool:
        """Count a refusal of a request sent as the server's `sent`-th; True when refusals
        are a full server's share of the last MIN_ASKED sent."""
        self.refused_at.append(sent)
        recent = sum(1 for at in self.refused_at if at > sent - MIN_ASKED)
        return recent >= max(MIN_REFUSED, REFUSED_SHARE * MIN_ASKED)


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
    refused: bool = False  # out for good: it refuses every request (never probed)
    _probe_delay: float = 0.0

    @property
    def allows_requests(self) -> bool:
        return self.opened_at is None

    @property
    def state(self) -> ServerState:
        if self.opened_at is None:
            return ServerState.HEALTHY
        return ServerState.REFUSED if self.refused else ServerState.DOWN

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

    def refuse(self, answer: str) -> None:
        """Out for the rest of the run: a probe of /v1/models would succeed and bring it back
        to refuse again, so it is not probed."""
        self.trip(f"refuses requests: {answer}")
        self.refused = True
        self.next_probe_at = float("inf")

    def probe_due(self, now: float) -> bool:
        return self.opened_at is not None and now >= self.next_probe_at

    def probe_failed(self, now: float) -> None:
        self._probe_delay = min(self._probe_delay * 2, self.max_probe_interval)
        self.next_probe_at = now + self._probe_delay

    def close(self) -> None:
        self.opened_at = None
        self.consecutive_failures = 0
        self.reason = None


@dataclass
class Liveness:
    """Health checks of a busy server: misses in a row, and when the last check ended."""

    misses: int = 0
    last_check: float = 0.0
    checking: bool = False

    def due(self, now: float, interval: float) -> bool:
        return not self.checking and now - self.last_check >= interval

    def begin(self) -> None:
        self.checking = True

    def answered(self, now: float) -> None:
        self.misses, self.checking, self.last_check = 0, False, now

    def missed(self, now: float) -> int:
        """Count a miss; returns the misses in a row."""
        self.misses += 1
        self.checking, self.last_check = False, now
        return self.misses
