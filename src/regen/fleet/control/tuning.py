"""Live concurrency: measure each server window by window and set its level (the decision
is `concurrency.decide`; this module only measures and applies).

A window lasts about one request's time on that server (so a change has shown its effect,
preemptions included) after a short settling time, and at least MIN_WINDOW; while a level
climbs and the engine counts its tokens, a quarter of that (a rise shows in the engine's
counter at once, and every window spent below the knee is output lost). The first window
opens once the engine has decoded its first tokens (it counts them), else at the server's
first answer: before that, on a slow engine, the first seconds are all prefill. With the
counter, a window also spans at least MIN_STEPS decode steps: half a second is a few steps
of a CPU engine, or one stalled prefill, and no measure of its level. A raised
level is filled at once (`made_room` wakes the requests waiting for a slot); a lowered one
takes effect at once (`withdraw_excess`: the requests past it that have no first token yet
are sent again, not left to finish last in an engine past its cliff).

Output tokens come from the engine's own counter where its /metrics has one (every token
decoded in the window, not only the answers that happened to finish in it), else from the
events of its streamed answers (load_source.py: such an engine's answers are streamed), a
window of which starts counting once a new level's requests have their first tokens and
spans MIN_EVENTS events a stream (fewer for a first climb's step that clearly pays); else
from the answers: such a window settles longer (SETTLE_ANSWERS), since the first answers
back after a change were sent before it, and closes early once MIN_ANSWERS show a clear
gain. A window in which the server went out of
rotation is dropped: a server that died is not a full one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from regen.fleet.control import concurrency, peers
from regen.fleet.control.level import young
from regen.fleet.control.tracker import Tracker
from regen.fleet.control.window import (
    AGED_SETTLE,
    MIN_EVENTS,
    MIN_EVENTS_DOUBLING,
    MIN_STEPS,
    MIN_WINDOW,
    SETTLE,
    SETTLE_ANSWERS,
    clearly_better,
    clearly_worse,
    doubles,
    length,
    prefilling,
    ready,
    room_in_cache,
)
from regen.fleet.engine_info import stated_limits
from regen.fleet.load_source import SCRAPE_TIMEOUT
from regen.fleet.server import Server

log = logging.getLogger("regen.fleet")

TICK = 0.25  # seconds between in-flight samples
# A start above START (a resumed run's level, an engine's stated one) is first read once
# the server answered WARM_SHARE of it: before that its requests are all of an age (they
# were sent at once), which no steady state of the level looks like.
WARM_SHARE = 1.0


class LiveConcurrency:
    def __init__(
        self,
        servers: list[Server],
        fixed: bool,
        last: dict[str, int] | None = None,
        made_room: Callable[[Server, int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fixed = fixed
        self.clock = clock  # a simulated fleet (testing/sim_fleet.py) brings its own
        self.last = last or {}  # url -> the level the run's last session ended with
        self.made_room = made_room or (lambda server, slots: None)  # wakes requests waiting
        self._trackers = [
            Tracker(s, concurrency.Level(limit=s.concurrency, cap=s.concurrency), clock=clock)
            for s in servers
        ]

    async def start(self) -> None:
        """Each server's first level: the last session's, else from what its engine states."""
        if self.fixed:
            return
        for tracker in self._trackers:
            server = tracker.server
            stated, tracker.kv_tokens = await stated_limits(server, SCRAPE_TIMEOUT)
            tracker.level = concurrency.start(server.concurrency, stated, self.last.get(server.url))
            tracker.warming = tracker.level.limit > concurrency.START
            server.set_limit(tracker.level.limit, tracker.level.reason)
            await tracker.source.stream_if_uncounted(tracker.level.limit)

    async def run(self) -> None:
        """Until cancelled."""
        if self.fixed:
            return
        await self.open_windows()
        while True:
            before = self.clock()
            await asyncio.sleep(TICK)
            await self.tick(late=max(0.0, self.clock() - before - TICK))

    async def open_windows(self) -> None:
        """Each server's first window (after `start`)."""
        for tracker in self._trackers:
            await self._open(tracker, self.clock())

    async def tick(self, late: float = 0.0) -> None:
        """One sample of every server, every TICK s; `late`: how much later than that the
        client's loop woke up (a busy client: its windows are read longer, window.py)."""
        for tracker in self._trackers:
            tracker.late = max(tracker.late, late)
        await asyncio.gather(*(self._tick(t) for t in self._trackers))

    async def _tick(self, tracker: Tracker) -> None:
        server, now = tracker.server, self.clock()
        if not server.available:
            tracker.went_down = True
            return
        if server.in_flight > server.limit:
            # Lowered: the window starts once the engine holds no more than the new level
            # (the excess finishes first, and its preemptions are not the new level's).
            await self._open(tracker, now)
            return
        if not server.stats.completed and not await self._decoding(tracker, now):
            # Nothing decoded yet: what the engine does now is the run's first prefills,
            # which no level repeats. The window starts later.
            if now - tracker.started >= MIN_WINDOW:
                await self._open(tracker, now)
            return
        if tracker.warming:
            if server.stats.completed < WARM_SHARE * server.limit:
                return  # the run's first requests, all of an age: no level's steady state
            tracker.warming = False
            await self._open(tracker, now)
            return
        if now < tracker.counting_from or prefilling(tracker, now):
            return
        if not tracker.busy:  # the window starts counting: the answers from now on
            tracker.counting_from = now  # (a late loop starts it late)
            tracker.tokens_at = server.stats.completion_tokens
            tracker.answers_at = server.stats.completed
            if tracker.source.by_stream:
                # Events from now on: a step up's new requests are prefilled first, and
                # their streams are silent meanwhile (an engine's own counter still counts
                # the running batch's tokens through a prefill chunked among them).
                tracker.first = await tracker.source.read()
                tracker.measured_from = tracker.source.read_at
        tracker.busy.append(server.in_flight / max(1, server.limit))
        tracker.awaiting.append(len(server.waiting))
        if now - tracker.counting_from < length(tracker):
            worse = now - tracker.counting_from >= MIN_WINDOW and clearly_worse(tracker)
            if clearly_better(tracker, now) or worse:  # (a level past a cliff is left
                self._close(tracker, now)  # before its own requests' time is out)
                await self._open(tracker, now)
            elif len(tracker.busy) % 4 == 0:  # the engine's queue, about once a second
                await self._sample_engine(tracker)
            return
        await self._sample_engine(tracker)
        if not ready(tracker, now, length(tracker)):
            return  # a window read on a starved loop, or a rate still moving: read longer
        if tracker.source.by_stream and not clearly_worse(tracker):
            events = tracker.steps()
            if events < MIN_EVENTS_DOUBLING or (events < MIN_EVENTS and not doubles(tracker)):
                return  # too few events yet (a prefill stall, a starved loop): no verdict
        elif (
            not tracker.source.by_stream
            and tracker.steps() < MIN_STEPS
            and not clearly_worse(tracker)
        ):
            return  # too few engine steps yet to judge (a CPU engine, a prefill stall)
        self._close(tracker, now)
        await self._open(tracker, now)

    async def _decoding(self, tracker: Tracker, now: float) -> bool:
        """Whether the engine's counter shows decoded tokens, before any answer; the first
        window opens when it first does (a request's time is not known yet: MIN_WINDOW)."""
        if tracker.decoding:
            return True
        if tracker.first is None or tracker.first.generated is None:
            return False
        load = await tracker.source.read()
        if load is None or load.generated is None or load.generated <= tracker.first.generated:
            return False
        tracker.decoding = True
        await self._open(tracker, now)
        return True

    async def _open(self, tracker: Tracker, now: float) -> None:
        server = tracker.server
        tracker.started = now
        tracker.first = await tracker.source.read()
        tracker.measured_from = tracker.source.read_at
        counter = tracker.first is not None and tracker.first.generated is not None
        settle = SETTLE if counter else SETTLE_ANSWERS
        tracker.room = room_in_cache(tracker)
        tracker.young = young(tracker.level) or tracker.room
        if not tracker.young:
            settle = max(settle, AGED_SETTLE)
        tracker.counting_from = now + settle * server.stats.latency_ewma
        tracker.busy, tracker.waiting, tracker.running, tracker.awaiting = [], [], [], []
        tracker.samples, tracker.late = [], 0.0
        tracker.went_down = False
        tracker.tokens_at = server.stats.completion_tokens
        tracker.load_failures_at, tracker.sent_at = server.stats.load_failures, server.stats.sent

    def _close(self, tracker: Tracker, now: float) -> None:
        server = tracker.server
        if tracker.went_down or not tracker.busy:
            return
        window = tracker.measure(now)
        before = tracker.level.limit
        tracker.level = concurrency.decide(tracker.level, window)
        others = [t.level for t in self._trackers if t is not tracker and t.server.available]
        tracker.level = peers.follow(tracker.level, others, tracker.peer_levels_tried)
        tracker.level = peers.shared_ceiling(tracker.level, others)
        server.set_limit(tracker.level.limit, tracker.level.reason)
        log.debug(
            "server %s: %.1f s at %d: %.0f tok/s, busy %.2f, refused %d of %d, loop %.2f s late"
            " -> %d (%s)",
            server.name,
            window.seconds,
            before,
            window.rate,
            window.busy,
            window.errors,
            window.requests,
            tracker.late,
            tracker.level.limit,
            tracker.level.reason,
        )
        if tracker.level.limit > before:
            self.made_room(server, tracker.level.limit - before)
        elif tracker.level.limit < before:
            withdraw_excess(server)
        if tracker.level.limit != before:
            log.info(
                "server %s: %d -> %d in flight (%s; %.0f tok/s)",
                server.name,
                before,
                tracker.level.limit,
                tracker.level.reason,
                window.rate,
            )

    async def _sample_engine(self, tracker: Tracker) -> None:
        load = await tracker.source.read()
        tracker.last, tracker.last_at = load, tracker.source.read_at
        if load is not None and load.generated is not None:
            tracker.samples.append((tracker.last_at, load.generated))
        if load is not None and load.waiting is not None and load.running is not None:
            tracker.waiting.append(load.waiting)
            tracker.running.append(load.running)


def withdraw_excess(server: Server) -> None:
    """A lowered level takes effect now: the requests past it that have no first token yet
    are withdrawn and sent again (fleet/waiting_streams.py), not left to finish last."""
    excess = server.in_flight - server.limit
    withdrawn = server.waiting.withdraw(excess) if excess > 0 else 0
    server.stats.withdrawn += withdrawn
    if withdrawn:
        log.info(
            "server %s: %d requests without a first token withdrawn (level %d), sent again",
            server.name,
            withdrawn,
            server.limit,
        )
