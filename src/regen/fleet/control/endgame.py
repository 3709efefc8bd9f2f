"""End-game dispatch: once every item of the run is sent, no slot of a fast server should sit
idle while a slow one holds the last requests.

The run tells it how many items are left (`near_end`). Near the end, each request is sent as
a `Flight` that a copy can race (from a stall timeout before it: a stream that stalls then
is still silent at the end), and a slower server's free slot is passed over while the
faster ones would finish what is left sooner (`declines`, placement.py). Once every
item is sent (`begin`), each slot freed with nobody waiting first takes requests queued
without a first token on a server with a deeper queue (rebalance.py: moved, not copied), then
is offered to the request predicted to finish last: if a fresh copy on the idle server is
predicted (forecast.py) to finish before the original, the copy starts, and whichever
answers first is the answer of that one request; the other is cancelled. A streamed request
silent for a few of its longest read pauses is taken for stalled (it would wait out the rest
of `--stall-timeout`, then start again), and looked for every SILENCE_CHECK_S: no slot frees
itself while the fleet waits for it alone. Nothing here writes a record: the one task of an
item gets exactly one answer back, so exactly-once is untouched. Copies of streams not
stalled are at most COPY_BUDGET of the requests answered, and their cost is counted
(`snapshot`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from regen.errors import ServerError
from regen.fleet.control.drain import DrainMeter
from regen.fleet.control.forecast import Forecast
from regen.fleet.control.placement import Placement
from regen.fleet.control.rebalance import move_waiting
from regen.fleet.server import Server
from regen.fleet.stream_progress import Progress, context_with

log = logging.getLogger("regen.fleet")

COPY_BUDGET = 0.01  # copies started, at most this share of the requests answered (and 1)
ARM_WINDOW = 2.0  # arm this many of the slowest server's request times before the end (and
# a stall timeout more: a stream that stalls now is still silent at the end, and a copy of it
# needs a flight to race)
SILENCE_CHECK_S = 1.0  # how often flights are looked at for silence, once all are sent

Request = Callable[[Server], Awaitable[Any]]
Answer = tuple[Any, Server, float]  # the answer, the server that gave it, when it was asked


@dataclass(eq=False)
class Flight:
    server: Server
    request: Request
    started: float
    original: asyncio.Future
    progress: Progress  # what its stream has brought so far (stream_progress.py)
    copy: asyncio.Task | None = None
    copy_server: Server | None = None
    copy_started: float = 0.0
    won: Answer | None = None  # the copy's answer, when it came first


class EndGame:
    def __init__(
        self,
        servers: list[Server],
        release: Callable[[Server], None],
        copy_failed: Callable[[Server, ServerError], None],
    ) -> None:
        self.servers = servers
        self._release, self._copy_failed = release, copy_failed
        self.forecast = Forecast()
        self.drain = DrainMeter()
        self.armed = False  # requests are sent as flights a copy can race
        self.placing = False  # slower servers' free slots may be passed over (placement.py)
        self.placement = Placement()
        self.begun = False  # every item is sent: idle slots may take copies
        self.halted = False
        self._flights: set[Flight] = set()
        self._copies: set[asyncio.Task] = set()
        self.copies_started = self.copies_won = 0
        self._budgeted = 0  # copies of streams not stalled (COPY_BUDGET)
        self._arm_at = self._place_at = 0.0  # items left at which to arm, and to place
        self._until_check = 0
        self._unsent = 0  # items not yet sent, about (while placing)
        self.tokens_wasted = 0.0  # estimated: a cancelled loser's time x its server's rate
        self._silence_check: asyncio.TimerHandle | None = None

    def near_end(self, left: int) -> None:
        """Told before each item is sent, with the items `left` (in flight or not). Arms once
        they are about what the fleet answers in ARM_WINDOW of its slowest request times and
        a stall timeout: the requests a copy may have to race later are sent as flights from
        then on (not before: a flight costs a task per request). Placement starts at
        ARM_WINDOW request times before the end."""
        if self.begun:
            return
        self._until_check -= 1
        if self._until_check <= 0:  # every so often: the fleet's speeds change slowly
            measured = any(s.stats.latency_ewma > 0 for s in self.servers)
            self._until_check = 64 if measured else 1  # (unmeasured: at the next item again)
            self._place_at = self._fleet_answers_within(ARM_WINDOW)
            self._arm_at = self._fleet_answers_within(ARM_WINDOW, self._longest_stall())
            self.placement.refresh(self.servers)
        self.armed = self.armed or left <= self._arm_at
        self.placing = self.placing or left <= self._place_at
        if self.placing:
            self._unsent = left - self._in_flight()

    def _fleet_answers_within(self, times: float, seconds: float = 0.0) -> float:
        """Requests the fleet answers in `times` of its slowest request times and `seconds`."""
        slots = sum(s.limit for s in self.servers)
        latencies = [s.stats.latency_ewma for s in self.servers if s.stats.latency_ewma > 0]
        if not latencies:
            return 2.0 * slots
        per_s = sum(s.limit / max(s.stats.latency_ewma, 1e-3) for s in self.servers)
        return slots + per_s * (times * max(latencies) + seconds)

    def _longest_stall(self) -> float:
        """The longest a streamed request may stay silent before it is cut (0: none streams)."""
        return max((s.timeouts.stall for s in self.servers if s.timeouts.stream), default=0.0)

    def begin(self) -> None:
        """Every item is sent to the fleet (some may still wait for a server's slot)."""
        self.armed = self.begun = True
        self.placing = False  # all sent: a retry may go anywhere
        self._unsent = 0
        self._watch_silence()

    def placed(self) -> None:
        """Every request has a server's slot: the drain starts (once)."""
        if self.drain.started is None:
            capacity = sum(s.limit for s in self.servers if s.available)
            self.drain.begin(time.monotonic(), capacity, self._in_flight())

    def halt(self) -> None:
        """The run stops: copies are cancelled (the originals finish or are cut by the
        drain, as every request is)."""
        self.halted = True
        if self._silence_check is not None:
            self._silence_check.cancel()
        for copy in list(self._copies):
            copy.cancel()

    # -- one request ---------------------------------------------------------------------
    async def send(self, server: Server, request: Request) -> Answer:
        """`request(server)`'s answer, or that of a copy elsewhere if it comes first."""
        started, progress = time.monotonic(), Progress()
        loop = asyncio.get_running_loop()
        original = loop.create_task(request(server), context=context_with(progress))
        flight = Flight(server, request, started, original, progress)
        self._flights.add(flight)
        try:
            return await flight.original, server, started
        except asyncio.CancelledError:
            if flight.won is None or _cancelling():
                raise
            return self._copy_won(flight)
        except ServerError:
            if flight.won is None:
                raise
            return self._copy_won(flight)  # its answer stands whatever the original did
        finally:
            self._flights.discard(flight)
            if not flight.original.done():
                flight.original.cancel()
            if flight.copy is not None and not flight.copy.done():
                flight.copy.cancel()  # the original came first: the copy is never used
                self._wasted(flight.copy_server, flight.copy_started)

    def _copy_won(self, flight: Flight) -> Answer:
        assert flight.won is not None
        self.copies_won += 1
        self._wasted(flight.server, flight.started)
        return flight.won

    def _wasted(self, server: Server | None, since: float) -> None:
        rate = Forecast.rate(server) if server is not None else None
        self.tokens_wasted += (time.monotonic() - since) * (rate or 0.0)

    # -- slots ---------------------------------------------------------------------------
    def tick(self) -> None:
        if self.begun:
            self.drain.tick(time.monotonic(), self._in_flight())

    def released(self, server: Server, offer: bool) -> None:
        """A slot of `server` was freed; `offer`: nobody waits for it, so requests queued
        on another server move to it (rebalance.py), or a copy takes it."""
        if not self.begun:
            return
        self.tick()
        if offer and not self.halted:
            move_waiting(server, self.servers, time.monotonic())
            self._copy_to_idle()
        self._watch_silence()

    def _watch_silence(self) -> None:
        """Look for stalled flights again in SILENCE_CHECK_S, while any is in the air."""
        if self._silence_check is None and self.begun and self._flights and not self.halted:
            self._silence_check = asyncio.get_running_loop().call_later(
                SILENCE_CHECK_S, self._silence_checked, context=contextvars.Context()
            )

    def _silence_checked(self) -> None:
        self._silence_check = None
        if not self.halted:
            self._copy_to_idle()
            self._watch_silence()

    def declines(self, server: Server) -> bool:
        """Near the end, a slower server's free slot is passed over (placement.py)."""
        return self.placing and self.placement.declines(server, self._unsent)

    def _in_flight(self) -> int:
        return sum(s.in_flight for s in self.servers)

    def _copy_to_idle(self) -> None:
        now = time.monotonic()
        while True:
            # A copy of a stalled stream is the retry its stall timeout would send later: it
            # wastes no tokens and favours no answer, so only the others are budgeted.
            budget = self._budgeted < max(1, COPY_BUDGET * self.forecast.answers)
            # the fastest server with a free slot, unless the request is its own (a stalled
            # stream's server may well be the fastest): then the next fastest
            pairs = ((idle, self._last_to_finish(idle, now, budget)) for idle in self._idle(now))
            chosen = next(((idle, flight) for idle, flight in pairs if flight), None)
            if chosen is None:
                return
            self._start_copy(chosen[1], chosen[0], now)

    def _idle(self, now: float) -> list[Server]:
        """The servers with a free slot and a measured rate, fastest first."""
        rated = [(rate, s) for s in self.servers if s.can_take(now) and (rate := Forecast.rate(s))]
        return [s for _, s in sorted(rated, key=lambda pair: pair[0], reverse=True)]

    def _last_to_finish(self, idle: Server, now: float, budget: bool) -> Flight | None:
        """The flight predicted to finish last among those a copy on `idle` would beat (with
        no `budget` left, among the stalled ones)."""
        faster = Forecast.rate(idle)
        best: Flight | None = None
        best_left = 0.0
        for flight in self._flights:
            if flight.copy is not None or flight.server is idle or not faster:
                continue
            if not budget and not Forecast.stalled(flight.server, flight.progress, now):
                continue
            elapsed = now - flight.started
            predicted = self.forecast.predict(flight.server, flight.progress, elapsed, faster, now)
            if predicted is None:
                continue
            left, redo = predicted
            if redo < left and left > best_left:
                best, best_left = flight, left
        return best

    def _start_copy(self, flight: Flight, server: Server, now: float) -> None:
        server.claim()
        self.copies_started += 1
        if not Forecast.stalled(flight.server, flight.progress, now):
            self._budgeted += 1
        flight.copy_server, flight.copy_started = server, now
        copy = self._run_copy(flight, server)  # (its stream reports to nobody)
        flight.copy = asyncio.get_running_loop().create_task(copy, context=context_with(None))
        self._copies.add(flight.copy)  # held until done, wherever its flight went
        flight.copy.add_done_callback(self._copies.discard)
        self.tick()

    async def _run_copy(self, flight: Flight, server: Server) -> None:
        try:
            data = await flight.request(server)
        except ServerError as err:  # the original goes on; the fleet counts the failure
            self._copy_failed(server, err)
            return
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: the original still answers; keep the traceback
            log.exception("a copy of a request on %s failed", server.name)
            return
        finally:
            self._release(server)
        if flight.original.done():  # the original answered in the same instant: it stands
            self._wasted(server, flight.copy_started)
            return
        flight.won = (data, server, flight.copy_started)
        flight.original.cancel()

    def snapshot(self) -> dict[str, Any]:
        return {
            "drain": self.drain.snapshot(time.monotonic()),
            "copies_started": self.copies_started,
            "copies_won": self.copies_won,
            "copy_tokens_wasted": round(self.tokens_wasted),
        }


def _cancelling() -> bool:
    """The current task itself is being cancelled (not just what it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
