"""The fleet's health watch: probe servers that are out of rotation until they answer again,
and check busy ones so a server that hangs is taken out and its requests move on.

It watches anything shaped as `Watched` (the dispatcher's Fleet is), so that it sits below
the dispatcher and never imports it."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from regen.errors import PermanentError, RetryableError, ServerRefused
from regen.fleet.engine import UNKNOWN
from regen.fleet.engine_info import identify
from regen.fleet.policy import HealthPolicy
from regen.fleet.server import Server


class Watched(Protocol):
    """What the watch reads of a fleet and asks of it."""

    servers: list[Server]
    health: HealthPolicy
    model: str | None  # once known, a server back from down must serve it

    def is_retired(self, server: Server) -> bool: ...
    def bring_back(self, server: Server, why: str) -> None: ...
    def take_out(self, server: Server, why: str, abort_in_flight: bool) -> None: ...


async def watch_health(fleet: Watched) -> None:
    """Run until cancelled: probe servers that are down, check live ones that are busy."""
    probes: set[asyncio.Task] = set()
    interval = fleet.health.liveness_interval
    try:
        while True:
            now = time.monotonic()
            for server in fleet.servers:
                if fleet.is_retired(server):
                    continue
                if server.probe_due(now):
                    probes.add(asyncio.create_task(_probe(fleet, server)))
                elif server.liveness_due(now, interval):
                    probes.add(asyncio.create_task(_check_liveness(fleet, server)))
            for probe in [p for p in probes if p.done()]:
                probes.discard(probe)
                probe.result()  # a probe only fails this way on a bug: let it surface
            await asyncio.sleep(0.25)
    finally:
        for probe in probes:
            probe.cancel()


async def _probe(fleet: Watched, server: Server) -> None:
    # Any HTTP answer, even an error status, means the server is up again; but one that
    # lists models must list ours (a server that rebooted with another model stays out).
    try:
        models = await server.models(timeout=fleet.health.liveness_timeout)
    except RetryableError:
        server.probe_failed()
        return
    except (PermanentError, ServerRefused):
        models = None
    if models is not None and fleet.model is not None and fleet.model not in models:
        server.probe_failed(f"serves {models}, not {fleet.model!r}")
        return
    if server.engine is UNKNOWN:  # down when the run asked every server which engine it is
        server.engine = await identify(server, timeout=fleet.health.liveness_timeout)
    fleet.bring_back(server, "answers again")


async def _check_liveness(fleet: Watched, server: Server) -> None:
    answered = True
    try:
        await server.alive(timeout=fleet.health.liveness_timeout)
    except RetryableError:
        answered = False
    except (PermanentError, ServerRefused):
        pass  # an error status is still an answer
    finally:
        if answered:  # (or cancelled: the check is free to run again later)
            server.liveness_answered()
    if not answered and server.liveness_missed(fleet.health.liveness_failures):
        fleet.take_out(server, "stopped answering health checks", abort_in_flight=True)
