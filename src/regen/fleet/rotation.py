"""A server's place in the dispatch rotation, owned by the server: slots in use, a pause a
full server asked for, its circuit breaker, refusal count, liveness checks and counters. The
dispatcher and the health watch ask (`can_take`, `record_failure`, `take_out`, ...) and never
write these fields themselves."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from regen.errors import (
    EngineAborted,
    Overloaded,
    RequestTimeout,
    RetryableError,
    ServerError,
    ServerRefused,
)
from regen.fleet.health import BackPressure, CircuitBreaker, Liveness, Refusals, ServerState
from regen.fleet.stats import ServerStats


@dataclass(eq=False, kw_only=True)
class Rotation:
    if TYPE_CHECKING:
        concurrency: int  # the server's own field: the most requests it may hold at once
    stats: ServerStats = field(default_factory=ServerStats)
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)
    refusals: Refusals = field(default_factory=Refusals)
    back_pressure: BackPressure = field(default_factory=BackPressure)
    liveness: Liveness = field(default_factory=Liveness)
    _in_flight: int = 0
    _paused_until: float = 0.0  # monotonic time: a full server asked us to wait until then
    _limit: int | None = None  # requests in flight now, chosen live (tuning.py); None: cap
    limit_reason: str = "fixed"  # why the level is what it is (concurrency.Level.reason)
    answered: int = 0  # requests it answered: a prompt its 500s follow is told by it
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)  # a simulated
    # fleet's (testing/sim_fleet.py) runs on its own

    @property
    def available(self) -> bool:
        return self.breaker.allows_requests

    @property
    def state(self) -> ServerState:
        return self.breaker.state

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def limit(self) -> int:
        """Requests this server may hold now: the live level, at most `concurrency`."""
        return self.concurrency if self._limit is None else self._limit

    def set_limit(self, limit: int, why: str) -> None:
        self._limit = max(1, min(self.concurrency, limit))
        self.limit_reason = why

    @property
    def load(self) -> float:
        return self._in_flight / self.limit

    def can_take(self, now: float) -> bool:
        """In rotation, with a free slot, and not asked to wait."""
        return self.available and self._in_flight < self.limit and self._paused_until <= now

    def claim(self) -> None:
        self._in_flight += 1
        self.stats.sent += 1

    def release(self) -> None:
        self._in_flight -= 1

    def record_success(self) -> None:
        self.answered += 1
        self.breaker.record_success()
        self.refusals.reset()
        # An answer is proof of life: a server too busy to answer health checks while it
        # generates is not hung while its answers keep coming (llama-cpp-python's server is
        # asked at a route that takes no lock: see server.LIVENESS_PATHS).
        self.liveness.misses = 0

    def record_retry(self) -> None:
        self.stats.retried += 1

    def record_refusal(self, error: ServerRefused) -> bool:
        """Count a refusal; True when it refuses every request (time to retire it)."""
        self._count_failure(error)
        return self.refusals.record(error.message, error.hint)

    def record_failure(self, error: RetryableError, pause: float) -> bool:
        """A refusal before any token (429/503, an in-stream error before the first token)
        pauses new requests to the server when it asks for that (Retry-After) or when the
        refusals are a full server's share (health.BackPressure; `pause` s): one refusal in
        many is a failed request, and it waits its own retry delay while the server serves
        the rest. Other failures, a 429/503 after the answer's first tokens among them (a
        failed request), count towards the circuit breaker; True when this one opened it."""
        self._count_failure(error)
        if isinstance(error, Overloaded) and not error.after_tokens:
            full = self.back_pressure.full(self.stats.sent)
            if error.retry_after is not None or full:
                wait = error.retry_after if error.retry_after is not None else pause
                self._paused_until = max(self._paused_until, self.clock() + wait)
            return False
        return self.breaker.record_failure(error.kind)

    def _count_failure(self, error: ServerError) -> None:
        self.stats.failed += 1
        self.stats.aborted += isinstance(error, EngineAborted)
        refused = isinstance(error, Overloaded | RequestTimeout) and not error.after_tokens
        self.stats.load_failures += refused
        self.stats.last_error = f"{error.kind}: {error.message}"

    def take_out(self, why: str) -> None:
        if self.breaker.allows_requests:
            self.breaker.trip(why)

    def refuse(self, answer: str) -> None:
        """Out for good: never probed back."""
        self.breaker.refuse(answer)

    def bring_back(self) -> None:
        self.breaker.close()
        self.liveness.misses = 0

    def probe_due(self, now: float) -> bool:
        """Out of rotation and due a probe; claims it (one probe at a time)."""
        if not self.breaker.probe_due(now):
            return False
        self.breaker.next_probe_at = float("inf")
        return True

    def probe_failed(self, reason: str | None = None) -> None:
        self.breaker.probe_failed(self.clock())
        if reason is not None:
            self.breaker.reason = reason

    def liveness_due(self, now: float, interval: float) -> bool:
        """Busy and in rotation, and not checked for `interval` s; claims the check."""
        due = self.available and self._in_flight > 0 and self.liveness.due(now, interval)
        if due:
            self.liveness.begin()
        return due

    def liveness_answered(self) -> None:
        self.liveness.answered(self.clock())

    def liveness_missed(self, allowed: int) -> bool:
        """Count a missed check; True (and the count starts again) at `allowed` in a row."""
        if self.liveness.missed(self.clock()) < allowed:
            return False
        self.liveness.misses = 0
        return True
