"""Which servers of a fleet are in rotation, out for a while, or out for good, and when the
run gives up on them: the dispatcher's bookkeeping of failures (dispatch.py sends the
requests; a server's own state is rotation.py's; the probes that bring one back, watch.py's).

A failure is counted on the server that gave it: refusals before any work (a server that
answers every request the same wrong way leaves for good, `retire`), and retryable failures
(enough in a row trip its breaker: out of rotation until a probe answers, `take_out`). With
every server out, the run waits `HealthPolicy.give_up_after` for one to come back.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from regen.errors import (
    FleetUnavailable,
    RequestTimeout,
    RetryableError,
    ServerError,
    ServerRefused,
    TransportError,
)
from regen.fleet.policy import HealthPolicy
from regen.fleet.server import Server
from regen.fleet.slots import WaitingLine
from regen.fleet.watch import watch_health


class Roster:
    def __init__(
        self,
        servers: list[Server],
        health: HealthPolicy,
        on_event: Callable[[str], None],
        line: WaitingLine,
        failure_pause: float,
    ) -> None:
        self.servers = servers
        self.health = health
        self.on_event = on_event
        self.line = line  # requests waiting for a slot: woken when the rotation changes
        self.all_down_since: float | None = None
        self.model: str | None = None  # once known, a server back from down must serve it
        self._failure_pause = failure_pause  # a failed server's pause (RetryPolicy.base_delay)
        self._retired: dict[Server, FleetUnavailable] = {}  # never coming back, and why

    def check_give_up(self) -> None:
        """Raises once every server is retired, or all were down for `give_up_after`."""
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
        server.take_out(f"not answering at start: {why}")
        self.on_event(f"server {server.name} does not answer ({why}); starting without it")

    def record_refusal(self, server: Server, error: ServerRefused) -> None:
        if server.record_refusal(error) and server not in self._retired:
            server.refuse(error.message)
            reason = f"server {server.name} refuses every request: {error.message}"
            self.retire(server, FleetUnavailable(reason, hint=error.hint))

    def record_failure(self, server: Server, error: RetryableError) -> None:
        if server.record_failure(error, pause=self._failure_pause):
            # A dead or hung server will not finish what it holds; one that answers 5xx may.
            dead = isinstance(error, TransportError | RequestTimeout)
            threshold = server.breaker.threshold
            self.take_out(server, f"{threshold} failures in a row ({error.kind})", dead)

    def record_error(self, server: Server, error: ServerError) -> None:
        """A failure seen outside a request's own retries (an end-game copy's): counted as
        any failed attempt on its server."""
        if isinstance(error, ServerRefused):
            self.record_refusal(server, error)
        elif isinstance(error, RetryableError):
            self.record_failure(server, error)

    def take_out(self, server: Server, why: str, abort_in_flight: bool) -> None:
        server.take_out(why)
        self.on_event(f"server {server.name} taken out of rotation: {why}")
        if abort_in_flight:
            server.abort_requests()  # they fail over to the healthy servers

    def bring_back(self, server: Server, why: str) -> None:
        if server in self._retired:
            return
        server.bring_back()
        self.all_down_since = None
        self.on_event(f"server {server.name} {why}; back in rotation")
        self.line.wake_all()

    def retire(self, server: Server, reason: FleetUnavailable) -> None:
        """Out for good (a process that keeps dying): no probe brings it back, and when every
        server is retired the run stops at once with `reason` instead of waiting."""
        self._retired[server] = reason
        self.take_out(server, reason.message.splitlines()[0], abort_in_flight=True)
        self.line.wake_all()  # waiters re-check and see the fleet is gone

    def is_retired(self, server: Server) -> bool:
        return server in self._retired

    async def watch_health(self) -> None:
        """Run until cancelled: probe servers that are down, check live ones that are busy."""
        await watch_health(self)
