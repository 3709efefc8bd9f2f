"""Send each request to the least-loaded healthy server and retry what is worth retrying;
the servers' place in the rotation, and when to give up on them, is roster.py's.

Least-loaded, not round-robin: a freed slot is refilled at once wherever it frees up, so a
slow server simply takes fewer requests and never holds the others back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from regen.errors import PermanentError, RetryableError, ServerRefused, Withdrawn
from regen.fleet.control import affinity
from regen.fleet.control.endgame import EndGame
from regen.fleet.control.rebalance import pick_order
from regen.fleet.overflow import room_left
from regen.fleet.policy import HealthPolicy, RetryPolicy
from regen.fleet.prompt_faults import RepeatedFaults
from regen.fleet.roster import Roster
from regen.fleet.server import CHAT_PATH, Server
from regen.fleet.slots import AFFINE_SCAN, WaitingLine

__all__ = ["AFFINE_SCAN", "Completed", "DispatchHalted", "Fleet", "HealthPolicy", "RetryPolicy"]

log = logging.getLogger("regen.fleet")


class DispatchHalted(Exception):
    """The run is stopping: a request still waiting for a slot or a backoff gives up, unsent
    and unrecorded, so the next run sends it again."""


@dataclass
class Completed:
    data: Any
    server: Server
    attempts: int
    latency: float
    max_tokens_lowered_to: int | None = None  # the engine refused the asked max_tokens


class Fleet(Roster):
    def __init__(
        self,
        servers: list[Server],
        retry: RetryPolicy | None = None,
        health: HealthPolicy | None = None,
        on_event: Callable[[str], None] | None = None,
        affine: bool = False,
    ) -> None:
        self.retry = retry or RetryPolicy()
        line = WaitingLine(affine)  # requests in `acquire` waiting for a slot
        health, on_event = health or HealthPolicy(), on_event or log.warning
        super().__init__(servers, health, on_event, line, self.retry.base_delay)
        self.affine = affine  # cache-affine dispatch (affinity.py), else least-loaded
        self.halted = False
        self._sleepers: set[asyncio.Future] = set()
        self.endgame = EndGame(servers, self.release, self.record_error)
        self._all_sent = False  # every item has its request (see all_sent)

    # -- slots ---------------------------------------------------------------------------
    def _pick(self, order: list[Server] | None = None) -> Server | None:
        """The least-loaded server that can take a request now; with a prefix's `order`,
        the first of that order within affinity.BOUND of the least-loaded."""
        now = time.monotonic()
        free = [s for s in self.servers if s.can_take(now) and s.load < 1.0]
        free = [s for s in free if not self.endgame.declines(s)]  # (near the end: slow ones)
        if not free:
            return None
        least = min(free, key=pick_order(at_end=self._all_sent))
        return least if order is None else affinity.choose(order, free, lambda s: s.load)

    async def acquire(self, key: bytes | None = None) -> Server:
        order = None
        if self.affine and key is not None and len(self.servers) > 1:
            order = affinity.ranked(key, self.servers, lambda s: s.url)
        woken = False
        while True:
            if self.halted:
                raise DispatchHalted
            server = self._pick(order)
            if server is not None and order and len(self.line) and not woken:
                # Affine, with requests already waiting: a slot freed on another server is
                # theirs (one whose prefix it holds is woken for it); only our own takes us.
                server = server if server is order[0] else None
            if server is not None:
                # sent for its prefix: the least-loaded pick would have been another server
                server.stats.affinity_sends += order is not None and server is not self._pick()
                server.claim()
                self.endgame.tick()
                self._begin_when_placed()
                return server
            self.check_give_up()
            await self.line.wait(order[0] if order else None)  # woken, or to re-check health
            woken = True

    def all_sent(self) -> None:
        """Every item has its request: copies may take idle slots from now on, and the drain
        is measured from when none of them waits for a server's slot any more (under live
        concurrency the run lets the caps be in flight, far more than the levels take)."""
        self.endgame.begin()
        self._all_sent = True
        self._begin_when_placed()

    def _begin_when_placed(self) -> None:
        if self._all_sent and not self.line.waiting:
            self.endgame.placed()

    def release(self, server: Server) -> None:
        server.release()
        self.line.wake(1, server)
        # a slot nobody waits for: requests queued elsewhere move to it, or a copy takes it
        self.endgame.released(server, offer=not self.line.waiting)

    def made_room(self, server: Server, slots: int) -> None:
        """The server's limit rose by `slots`: as many waiters go now, not at their next
        release or time-out (a climb is judged by a window in which the new level runs)."""
        self.line.wake(slots, server)

    def halt(self) -> None:
        """The run stops: every request waiting for a slot or a backoff leaves now (with
        DispatchHalted); those on a server finish or are cut by the drain."""
        self.halted = True
        self.endgame.halt()
        self.line.wake_all()
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

    # -- requests ------------------------------------------------------------------------
    async def complete(self, body: dict[str, Any]) -> Completed:
        """Run one chat completion to success: `post` to /v1/chat/completions. An engine
        that refuses prompt + max_tokens over its context (SGLang) is asked once more with
        max_tokens lowered to what fits, as vLLM does by itself (see overflow.py)."""
        key = affinity.prefix_key(body) if self.affine else None
        try:
            return await self.post(CHAT_PATH, body, key)
        except PermanentError as err:
            fits = room_left(err)
            if fits is None or fits >= body.get("max_tokens", fits + 1):
                raise
            first_attempts = err.attempts
        done = await self.post(CHAT_PATH, {**body, "max_tokens": fits}, key)
        done.attempts += first_attempts
        done.max_tokens_lowered_to = fits
        return done

    async def post(self, path: str, body: dict[str, Any], key: bytes | None = None) -> Completed:
        """POST `body` to `path` on the least-loaded server, to success, retrying elsewhere
        as needed, with the same retries, breaker and health as every request.

        Raises PermanentError at once, the last RetryableError once the retry policy says
        stop, FleetUnavailable when no server can serve, DispatchHalted when the run stops.
        """
        return await self._send(lambda server: server.post(path, body), key)

    async def _send(
        self, request: Callable[[Server], Awaitable[Any]], key: bytes | None = None
    ) -> Completed:
        attempts, faults = 0, RepeatedFaults()
        while True:
            server = await self.acquire(key)
            attempts += 1
            started, answered = time.monotonic(), server
            try:
                if self.endgame.armed:  # near the end: a copy may answer instead
                    data, answered, started = await self.endgame.send(server, request)
                else:
                    data = await request(server)
            except Withdrawn:  # a lowered level's excess, before any token: sent again
                attempts -= 1
                continue
            except (RetryableError, ServerRefused) as err:
                error = err
            except PermanentError as err:
                err.attempts = attempts
                raise
            else:
                answered.record_success()
                self.endgame.forecast.answered(data)
                return Completed(data, answered, attempts, time.monotonic() - started)
            finally:
                self.release(server)
            refused = isinstance(error, ServerRefused)
            if refused:
                self.record_refusal(server, error)
            elif rejected := faults.rejected(server, error):  # the prompt's, not the server's
                rejected.attempts = attempts
                raise rejected from error
            else:
                self.record_failure(server, error)
            if not self.retry.allows_retry(attempts, error):
                error.attempts = attempts
                raise error
            if refused:
                continue  # the server's fault, not the prompt's: send it elsewhere at once
            server.record_retry()
            await self._pause(self.retry.delay(attempts, error))
