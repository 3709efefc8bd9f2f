"""A fleet in virtual time: regen's own live concurrency (tuning.LiveConcurrency, its
trackers, `concurrency.decide`, and the servers' counters in fleet/server.py) driving
fake_scheduler engines through a simulated client, on a clock only the simulation moves.

A draw of the engine family (engine_family.py) runs in a second or two of CPU, whatever the
machine's load, so hundreds of draws judge a rule where one HTTP run judges one case; the
HTTP fakes and a real `regen generate` stay the truth (bench/bench_family.py). The client is
modelled as regen's dispatcher behaves: each server kept at its level from a shared queue of
prompts (the least-loaded first), answers streamed and counted event by event, a failed
request sent again after the retry policy's delay, a refusal's Retry-After honoured, and at
the end, streams without a first token moved from a deep queue to a server with room
(rebalance.py), and a stalled stream copied to one (sim_endgame.py). Not modelled: the end
game's copies of requests that are only slow, and the client's own CPU.
"""

from __future__ import annotations

import asyncio
import heapq
import random
from collections import deque

from regen.errors import Overloaded, RequestTimeout
from regen.fleet.control import tuning
from regen.fleet.control.rebalance import move_waiting, pick_order
from regen.fleet.server import Timeouts
from regen.testing.fake_scheduler import EngineCurve, Scheduler
from regen.testing.sim_endgame import SILENCE_CHECK_S, SimEndGame
from regen.testing.sim_parts import EVENTS, Busy, Clock, Result, Sent, stream_events
from regen.testing.sim_server import SimServer, SimWaiting

RETRY_AFTER = 0.2  # the plain fake's 429
CAP = 1024
SPREAD_S = 0.05  # stalled streams cut within this of each other (not all in one instant)


class SimFleet:
    def __init__(
        self,
        curves: list[EngineCurve],
        lengths: list[int],
        faults: tuple[str, ...] = (),
        fixed: int | None = None,
        busy: Busy | None = None,
        seed: int = 0,
        stall_timeout: float = 10.0,
        last: dict[str, int] | None = None,
    ) -> None:
        self.clock = Clock()
        self.rng = random.Random(seed)
        self.busy = busy or Busy()
        self.lengths, self.stall_timeout = lengths, stall_timeout
        self.servers = [
            SimServer(
                f"http://127.0.0.1:{9000 + i}",
                fixed or CAP,
                timeouts=Timeouts(stall=stall_timeout, stream=True),
                scheduler=Scheduler(curve),
                clock=self.clock,
            )
            for i, curve in enumerate(curves)
        ]
        for i, server in enumerate(self.servers):
            server.waiting = server.streams = SimWaiting(lambda n, i=i: self._withdraw(i, n))
        self.faults = [list(faults or ("ok",)) for _ in curves]
        self.tuner = tuning.LiveConcurrency(self.servers, fixed is not None, last, clock=self.clock)
        self.endgame = SimEndGame(self.servers, stall_timeout)
        self.pending: deque[int] = deque(range(len(lengths)))
        self.sent: dict[int, Sent] = {}  # id(job) -> what was sent (it holds the job)
        self.jobs: list[set[int]] = [set() for _ in curves]  # ids of the jobs on each engine
        self.answered: list[int] = []
        self.tokens = 0
        self.peaks = [0] * len(curves)
        self._heap: list[tuple[float, int, str, int]] = []
        self._order = 0
        self._ticking = [False] * len(curves)
        self._next_send = 0.0
        self._faults_at = [0] * len(curves)

    def run(self, limit: float = 3600.0) -> Result:
        asyncio.run(self._run(limit))
        last = max(self._last_answer, 1e-9)
        return Result(
            rate=self.tokens / last,
            seconds=last,
            answered=len(set(self.answered)),
            answers=len(self.answered),
            levels=[s.limit for s in self.servers],
            peaks=self.peaks,
        )

    _last_answer = 0.0
    _retrying = 0  # prompts waiting for their retry
    _all_sent = False  # every prompt was sent once (retries and withdrawals come later)
    _late = 0.0  # how late the controller's present tick is

    async def _run(self, limit: float) -> None:
        await self.tuner.start()
        await self.tuner.open_windows()
        self._at(tuning.TICK, "control", -1)
        self._dispatch()
        while (
            self._heap and (self.pending or self.sent or self._retrying) and self.clock.now < limit
        ):
            at, _, kind, i = heapq.heappop(self._heap)
            self.clock.now = at
            if kind == "engine":
                self._engine_tick(i)
            elif kind == "control":
                late = self.rng.uniform(0, self.busy.lag)
                if not self.tuner.fixed:
                    self._count_streams()
                    await self.tuner.tick(late=self._late)
                self._late = late
                self._at(at + tuning.TICK + late, "control", -1)
            elif kind == "retry":
                self._retrying -= 1
                self.pending.appendleft(i)
            elif kind == "back":
                self.servers[i].bring_back()
            elif kind in ("stalled", "silent"):  # a stalled stream: cut, or copied
                (self._stalled if kind == "stalled" else self._silent)(i)
            self._dispatch()

    def _at(self, at: float, kind: str, i: int) -> None:
        self._order += 1
        heapq.heappush(self._heap, (at, self._order, kind, i))

    def _dispatch(self) -> None:
        now = self.clock.now
        self._send_pending(now)
        self._all_sent = self._all_sent or not self.pending
        if self._all_sent and not self.pending and not self._retrying:
            self._move_waiting(now)

    def _send_pending(self, now: float) -> None:
        while self.pending and now >= self._next_send:
            room = [s for s in self.servers if s.can_take(now)]
            if not room:
                return
            server = min(room, key=pick_order(at_end=self._all_sent))  # as Fleet._pick
            self._send(self.servers.index(server), self.pending.popleft())
            if self.busy.sends_per_s != float("inf"):
                self._next_send = max(now, self._next_send) + 1 / self.busy.sends_per_s
        if self.pending and now < self._next_send:
            self._at(self._next_send, "send", -1)

    def _move_waiting(self, now: float) -> None:
        """As the end game does on a freed slot nobody waits for (rebalance.py)."""
        self._count_streams()  # the client knows a stream's first token as it comes
        for server in self.servers:
            if move_waiting(server, self.servers, now):
                self._send_pending(now)

    def _send(self, i: int, prompt: int, copy_of: Sent | None = None) -> None:
        server, now = self.servers[i], self.clock.now
        left = len(self.pending) + len(self.sent) + self._retrying + 1
        flight = copy_of is None and self.endgame.flight(left)  # (told of each, as regen's)
        server.claim()
        self.peaks[i] = max(self.peaks[i], server.in_flight)
        fault = self.faults[i][self._faults_at[i] % len(self.faults[i])]
        self._faults_at[i] += 1
        if fault in ("stream_refused", "429"):
            server.release()
            error = Overloaded("refused", retry_after=RETRY_AFTER if fault == "429" else None)
            server.record_failure(error, pause=1.0)
            if copy_of is None:  # (a copy that failed leaves its original to go on)
                self._retry(prompt, 0.0 if fault == "429" else 1.0)
            return
        server.streams.count(+1)
        words = [f"p{prompt}w{j}" for j in range(60)]
        job = server.scheduler.add(words, self.lengths[prompt])
        self.jobs[i].add(id(job))
        sent = Sent(job, prompt, server, now, fault, self.lengths[prompt], flight=flight)
        self.sent[id(job)], sent.copy_of = sent, copy_of
        if copy_of is not None:
            copy_of.copy = sent
        if not self._ticking[i]:
            self._ticking[i] = True
            self._at(now, "engine", i)

    def _withdraw(self, i: int, count: int) -> int:
        """The youngest `count` requests on server i without a first event, queued again."""
        waiting = [self.sent[key] for key in self.jobs[i] if self.sent[key].events == 0]
        youngest = sorted(waiting, key=lambda sent: (sent.at, sent.prompt), reverse=True)[:count]
        for sent in youngest:  # (a copy withdrawn is dropped: its original goes on)
            self._cancel(sent)
            if sent.copy_of is None:
                self.pending.appendleft(sent.prompt)
        return len(youngest)

    def _live(self, sent: Sent) -> bool:  # (an id of a job gone may be a new job's)
        return self.sent.get(id(sent.job)) is sent

    def _cancel(self, sent: Sent) -> None:
        """The request is dropped: by its engine, if still running there, and by the client."""
        i = self.servers.index(sent.server)
        if id(sent.job) in self.jobs[i]:
            sent.server.scheduler.drop(sent.job)
            self.jobs[i].discard(id(sent.job))
        del self.sent[id(sent.job)]
        if sent.events == 0:
            sent.server.streams.count(-1)
        sent.server.release()

    def _engine_tick(self, i: int) -> None:
        server = self.servers[i]
        seconds, finished = server.scheduler.tick()
        for job in finished:
            self.jobs[i].discard(id(job))
            sent = self.sent[id(job)]
            stream_events(sent)
            if sent.fault == "stall" and sent.copy_of is None:  # silent from here: cut at
                cut = self.clock.now + self.stall_timeout + self.rng.uniform(0, SPREAD_S)
                self._at(cut, "stalled", key := self.endgame.watch(sent))  # the stall timeout,
                if sent.flight:  # copied once found
                    self._at(self.clock.now + self.endgame.silent_after, "silent", key)
                continue
            del self.sent[id(job)]
            if sent.fault == "ok":
                self._answered(sent)
            else:  # (a copy that stalls is cut after its original: it fails, and no more)
                self._failed(sent, after_tokens=True)
        if server.scheduler.idle:
            self._ticking[i] = False
        else:
            self._at(
                self.clock.now + max(seconds, 1e-6) * server.scheduler.curve.time_scale, "engine", i
            )

    def _count_streams(self) -> None:
        """Before the controller reads the servers: the events each stream has brought."""
        for jobs in self.jobs:
            for key in jobs:
                stream_events(self.sent[key])

    def _silent(self, key: int) -> None:
        """A stalled flight: copied once every prompt is sent and a server has room."""
        sent = self.endgame.stalls.get(key)
        if sent is None or sent.copy is not None or not self._live(sent):
            return
        now = self.clock.now
        target = self._all_sent and self.endgame.copy_to(sent.server, now)
        if target:
            self._send(self.servers.index(target), sent.prompt, copy_of=sent)
        else:
            self._at(now + SILENCE_CHECK_S, "silent", key)

    def _stalled(self, key: int) -> None:
        """Cut at the stall timeout unless its copy answered: a copy still running goes too."""
        if not self._live(sent := self.endgame.stalls.pop(key)):
            return
        del self.sent[id(sent.job)]
        if sent.copy is not None and self._live(sent.copy):
            self._cancel(sent.copy)
        self._failed(sent, after_tokens=True, stalled=True)

    def _answered(self, sent: Sent) -> None:
        if sent.copy_of is not None and self._live(sent.copy_of):
            self._cancel(sent.copy_of)  # the copy came first: the stalled original is cancelled
        server, now = sent.server, self.clock.now
        if sent.events == 0:
            server.streams.count(-1)
        server.stats.streamed_events += EVENTS - sent.events
        server.release()
        server.record_success()
        server.stats.record_success(now - sent.at, sent.tokens, 60)
        self.answered.append(sent.prompt)
        self.tokens += sent.tokens
        self._last_answer = now

    def _failed(self, sent: Sent, after_tokens: bool, stalled: bool = False) -> None:
        server = sent.server
        if sent.events == 0:
            server.streams.count(-1)
        server.release()
        error = RequestTimeout("stalled") if stalled else Overloaded("503 in the stream")
        error.after_tokens = after_tokens
        if server.record_failure(error, pause=1.0):
            # Failures in a row: out of rotation, and back once a health probe answers.
            server.take_out(error.kind)
            self._at(self.clock.now + 1.0, "back", self.servers.index(server))
        if sent.copy_of is None:  # (a failed copy: its original goes on)
            self._retry(sent.prompt, 1.0)

    def _retry(self, prompt: int, delay: float) -> None:
        self._retrying += 1
        self._at(self.clock.now + self.rng.uniform(0, delay), "retry", prompt)
