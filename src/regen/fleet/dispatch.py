"""Send each request to the least-loaded healthy server, retry what is worth retrying, and
keep every server's health up to date.

Least-loaded, not round-robin: a freed slot is refilled at once wherever it frees up, so a
slow server simply takes fewer requests and never holds the others back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from regen.errors import (
    FleetUnavailable,
    Overloaded,
    PermanentError,
    RequestTimeout,
    RetryableError,
    ServerRefused,
    TransportError,
)
from regen.fleet.server import Server

log = logging.getLogger("regen.fleet")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter; a server's Retry-After wins when it sends one.

    One counter per request, its attempts. A failure that may be the prompt's fault (5xx,
    408, 429, a timeout) is retried while attempts <= `max_retries`. A connection failure
    (refused, reset) or a server refusing every request says nothing about the prompt, so it
    is retried up to the larger `max_attempts`: the circuit breaker, refusal count and
    --give-up-after bound a bad fleet, and this cap still ends a prompt that kills every
    server it touches.
    """

    max_retries: int = 5
    max_attempts: int = 24
    base_delay: float = 1.0
    max_delay: float = 60.0

    def allows_retry(self, attempts: int, error: RetryableError | ServerRefused) -> bool:
        blameless = isinstance(error, TransportError | ServerRefused)
        return attempts < (self.max_attempts if blameless else self.max_retries + 1)

    def delay(self, attempt: int, error: RetryableError) -> float:
        if isinstance(error, Overloaded) and error.retry_after is not None:
            return min(error.retry_after, 10 * self.max_delay)
        return random.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))


@dataclass(frozen=True)
class HealthPolicy:
    """How servers are watched. A server with requests in flight is asked /v1/models every
    `liveness_interval` s; `liveness_failures` misses in a row mean it hangs: it is taken out
    and its requests go elsewhere. `give_up_after` bounds the wait when every server is down
    (0 waits forever)."""

    liveness_interval: float = 15.0
    liveness_timeout: float = 10.0
    liveness_failures: int = 3
    give_up_after: float = 1800.0


class DispatchHalted(Exception):
    """The run is stopping: a request still waiting for a slot or a backoff gives up, unsent
    and unrecorded, so the next run sends it again."""


@dataclass
class Completed:
    data: Any
    server: Server
    attempts: int
    latency: float


class Fleet:
    def __init__(
        self,
        servers: list[Server],
        retry: RetryPolicy | None = None,
        health: HealthPolicy | None = None,
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        self.servers = servers
        self.retry = retry or RetryPolicy()
        self.health = health or HealthPolicy()
        self.on_event = on_event or log.warning
        self.all_down_since: float | None = None
        self.model: str | None = None  # once known, a server back from down must serve it
        self.halted = False
        self._waiters: deque[asyncio.Future] = deque()
        self._sleepers: set[asyncio.Future] = set()
        self._liveness_misses: dict[Server, int] = {s: 0 for s in servers}
        self._last_liveness: dict[Server, float] = {s: 0.0 for s in servers}
        self._retired: dict[Server, FleetUnavailable] = {}  # never coming back, and why

    # -- slots ---------------------------------------------------------------------------
    def _pick(self) -> Server | None:
        best: Server | None = None
        best_load = 1.0
        now = time.monotonic()
        for server in self.servers:
            if (
                server.available
                and server.in_flight < server.concurrency
                and server.paused_until <= now
            ):
                load = server.in_flight / server.concurrency
                if load < best_load:
                    best, best_load = server, load
        return best

    async def acquire(self) -> Server:
        while True:
            if self.halted:
                raise DispatchHalted
            server = self._pick()
            if server is not None:
                server.in_flight += 1
                return server
            self._check_give_up()
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            with contextlib.suppress(TimeoutError):  # wake up to re-check health and give-up
                await asyncio.wait_for(waiter, timeout=1.0)

    def release(self, server: Server) -> None:
        server.in_flight -= 1
        self._wake(1)

    def halt(self) -> None:
        """The run stops: every request waiting for a slot or a backoff leaves now (with
        DispatchHalted); those on a server finish or are cut by the drain."""
        self.halted = True
        self._wake(len(self._waiters))
        for sleeper in self._sleepers:
            if not sleeper.done():
                sleeper.set_result(None)

    async def _pause(self, seconds: float) -> None:
        """asyncio.sleep that `halt` cuts short."""
        sleeper = asyncio.get_running_loop().create_future()
        self._sleepers.add(sleeper)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(sleeper, timeout=seconds)
        finally:
            self._sleepers.discard(sleeper)
        if self.halted:
            raise DispatchHalted

    def _wake(self, count: int) -> None:
        while self._waiters and count:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                count -= 1

    def _check_give_up(self) -> None:
        if len(self._retired) == len(self.servers):
            raise next(reversed(self._retired.values()))  # the last one to go says why
        if any(s.available for s in self.servers):
            self.all_down_since = None
            return
        now = time.monotonic()
        if self.all_down_since is None:
            self.all_down_since = now
            self.on_event("every server is down; waiting for one to come back")
        elif self.health.give_up_after and now - self.all_down_since > self.health.give_up_after:
            raise FleetUnavailable(
                f"no server has answered for {now - self.all_down_since:.0f}s",
                hint="bring the servers back and run the same command again to resume, "
                "or raise --give-up-after",
            )

    def take_out_at_start(self, server: Server, why: str) -> None:
        """A server that did not answer the preflight: the run starts without it, and the
        health watch probes it until it answers."""
        server.breaker.trip(f"not answering at start: {why}")
        self.on_event(f"server {server.name} does not answer ({why}); starting without it")

    # -- requests ------------------------------------------------------------------------
    async def complete(self, body: dict[str, Any]) -> Completed:
        """Run one chat completion to success, retrying elsewhere as needed.

        Raises PermanentError at once, the last RetryableError once the retry policy says
        stop, FleetUnavailable when no server can serve, DispatchHalted when the run stops.
        """
        attempts = 0
        while True:
            server = await self.acquire()
            attempts += 1
            started = time.monotonic()
            try:
                data = await server.chat(body)
            except (RetryableError, ServerRefused) as err:
                error = err
            except PermanentError as err:
                err.attempts = attempts
                raise
            else:
                server.breaker.record_success()
                server.refusals.reset()
                return Completed(data, server, attempts, time.monotonic() - started)
            finally:
                self.release(server)
            refused = isinstance(error, ServerRefused)
            if refused:
                self._record_refusal(server, error)
            else:
                self._record_failure(server, error)
            if not self.retry.allows_retry(attempts, error):
                error.attempts = attempts
                raise error
            if refused:
                continue  # the server's fault, not the prompt's: send it elsewhere at once
            server.stats.retried += 1
            await self._pause(self.retry.delay(attempts, error))

    def _record_refusal(self, server: Server, error: ServerRefused) -> None:
        server.stats.failed += 1
        server.stats.last_error = f"{error.kind}: {error.message}"
        if server.refusals.record(error.message, error.hint) and server not in self._retired:
            server.breaker.refuse(error.message)
            reason = f"server {server.name} refuses every request: {error.message}"
            self.retire(server, FleetUnavailable(reason, hint=error.hint))

    def _record_failure(self, server: Server, error: RetryableError) -> None:
        """A 429/503 pauses new requests to that server (it is alive and asked us to wait);
        other failures count towards its circuit breaker."""
        server.stats.failed += 1
        server.stats.last_error = f"{error.kind}: {error.message}"
        if isinstance(error, Overloaded):
            wait = error.retry_after if error.retry_after is not None else self.retry.base_delay
            server.paused_until = max(server.paused_until, time.monotonic() + wait)
            return
        if server.breaker.record_failure(error.kind):
            # A dead or hung server will not finish what it holds; one that answers 5xx may.
            dead = isinstance(error, TransportError | RequestTimeout)
            self.take_out(
                server, f"{server.breaker.threshold} failures in a row ({error.kind})", dead
            )

    def take_out(self, server: Server, why: str, abort_in_flight: bool) -> None:
        if server.breaker.allows_requests:
            server.breaker.trip(why)
        self.on_event(f"server {server.name} taken out of rotation: {why}")
        if abort_in_flight:
            server.abort_requests()  # they fail over to the healthy servers

    def bring_back(self, server: Server, why: str) -> None:
        if server in self._retired:
            return
        server.breaker.close()
        self._liveness_misses[server] = 0
        self.all_down_since = None
        self.on_event(f"server {server.name} {why}; back in rotation")
        self._wake(len(self._waiters))

    def retire(self, server: Server, reason: FleetUnavailable) -> None:
        """Out for good (a process that keeps dying): no probe brings it back, and when every
        server is retired the run stops at once with `reason` instead of waiting."""
        self._retired[server] = reason
        self.take_out(server, reason.message.splitlines()[0], abort_in_flight=True)
        self._wake(len(self._waiters))  # waiters re-check and see the fleet is gone

    # -- health --------------------------------------------------------------------------
    async def watch_health(self) -> None:
        """Run until cancelled: probe servers that are down, check live ones that are busy."""
        probes: set[asyncio.Task] = set()
        try:
            while True:
                now = time.monotonic()
                for server in self.servers:
                    if server in self._retired:
                        continue
                    if server.breaker.probe_due(now):
                        server.breaker.next_probe_at = float("inf")  # one probe at a time
                        probes.add(asyncio.create_task(self._probe(server)))
                    elif self._liveness_due(server, now):
                        self._last_liveness[server] = float("inf")
                        probes.add(asyncio.create_task(self._check_liveness(server)))
                for probe in [p for p in probes if p.done()]:
                    probes.discard(probe)
                    probe.result()  # a probe only fails this way on a bug: let it surface
                await asyncio.sleep(0.25)
        finally:
            for probe in probes:
                probe.cancel()

    def _liveness_due(self, server: Server, now: float) -> bool:
        return (
            server.available
            and server.in_flight > 0
            and now - self._last_liveness[server] >= self.health.liveness_interval
        )

    async def _probe(self, server: Server) -> None:
        # Any HTTP answer, even an error status, means the server is up again; but one that
        # lists models must list ours (a server that rebooted with another model stays out).
        try:
            models = await server.models(timeout=self.health.liveness_timeout)
        except RetryableError:
            server.breaker.probe_failed(time.monotonic())
            return
        except (PermanentError, ServerRefused):
            models = None
        if models is not None and self.model is not None and self.model not in models:
            server.breaker.probe_failed(time.monotonic())
            server.breaker.reason = f"serves {models}, not {self.model!r}"
            return
        self.bring_back(server, "answers again")

    async def _check_liveness(self, server: Server) -> None:
        try:
            await server.models(timeout=self.health.liveness_timeout)
            self._liveness_misses[server] = 0
        except (PermanentError, ServerRefused):
            self._liveness_misses[server] = 0
        except RetryableError:
            self._liveness_misses[server] += 1
            if self._liveness_misses[server] >= self.health.liveness_failures:
                self._liveness_misses[server] = 0
                self.take_out(server, "stopped answering health checks", abort_in_flight=True)
        finally:
            self._last_liveness[server] = time.monotonic()
