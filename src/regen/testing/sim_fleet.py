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
(rebalance.py). Not modelled: the end game's copies of the last requests, and the client's
own CPU.
"""

from __future__ import annotations

import asyncio
import heapq
import random
from collections import deque
from dataclasses import dataclass

from regen.errors import Overloaded, RequestTimeout
from regen.fleet.control import tuning
from regen.fleet.control.rebalance import move_waiting, pick_order
from regen.fleet.server import Timeouts
from regen.testing.fake_scheduler import EngineCurve, Job, Scheduler
from regen.testing.sim_server import SimServer, SimWaiting

EVENTS = 64  # stream events an answer (the fakes': its text in 7-character pieces)
RETRY_AFTER = 0.2  # the plain fake's 429
CAP = 1024
SPREAD_S = 0.05  # stalled streams cut within this of each other (not all in one instant)


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Busy:
    """A busy client: its loop wakes up to `lag` s late (the controller's samples with it),
    and it sends at most `sends_per_s` requests a second."""

    lag: float = 0.0
    sends_per_s: float = float("inf")


@dataclass(eq=False)
class _Sent:
    job: Job
    prompt: int
    server: SimServer
    at: float
    fault: str
    tokens: int
    events: int = 0


@dataclass
class Result:
    rate: float  # tokens of whole answers a second, from the first send to the last answer
    seconds: float
    answered: int  # distinct prompts answered
    answers: int  # answers stored (more than `answered`: some answered twice)
    levels: list[int]  # each server's level at the end
    peaks: list[int]  # each server's most requests in flight


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
                timeouts=Timeouts(stream=True),
                scheduler=Scheduler(curve),
                clock=self.clock,
            )
            for i, curve in enumerate(curves)
        ]
        for i, server in enumerate(self.servers):
            server.waiting = server.streams = SimWaiting(lambda n, i=i: self._withdraw(i, n))
        self.faults = [list(faults or ("ok",)) for _ in curves]
        self.tuner = tuning.LiveConcurrency(self.servers, fixed is not None, last, clock=self.clock)
        self.pending: deque[int] = deque(range(len(lengths)))
        self.sent: dict[int, _Sent] = {}  # id(job) -> what was sent (it holds the job)
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
            elif kind == "stalled":
                self._failed(self.sent.pop(i), after_tokens=True, stalled=True)
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

    def _send(self, i: int, prompt: int) -> None:
        server, now = self.servers[i], self.clock.now
        server.claim()
        self.peaks[i] = max(self.peaks[i], server.in_flight)
        fault = self.faults[i][self._faults_at[i] % len(self.faults[i])]
        self._faults_at[i] += 1
        if fault in ("stream_refused", "429"):
            server.release()
            error = Overloaded("refused", retry_after=RETRY_AFTER if fault == "429" else None)
            server.record_failure(error, pause=1.0)
            self._retry(prompt, 0.0 if fault == "429" else 1.0)
            return
        server.streams.count(+1)
        words = [f"p{prompt}w{j}" for j in range(60)]
        job = server.scheduler.add(words, self.lengths[prompt])
        self.jobs[i].add(id(job))
        self.sent[id(job)] = _Sent(job, prompt, server, now, fault, self.lengths[prompt])
        if not self._ticking[i]:
            self._ticking[i] = True
            self._at(now, "engine", i)

    def _withdraw(self, i: int, count: int) -> int:
        """The youngest `count` requests on server i without a first event: dropped by the
        engine (the client went away) and back at the head of the queue."""
        waiting = [self.sent[key] for key in self.jobs[i] if self.sent[key].events == 0]
        youngest = sorted(waiting, key=lambda sent: (sent.at, sent.prompt), reverse=True)[:count]
        for sent in youngest:
            sent.server.scheduler.drop(sent.job)
            self.jobs[i].discard(id(sent.job))
            del self.sent[id(sent.job)]
            sent.server.streams.count(-1)
            sent.server.release()
            self.pending.appendleft(sent.prompt)
        return len(youngest)

    def _engine_tick(self, i: int) -> None:
        server = self.servers[i]
        seconds, finished = server.scheduler.tick()
        for job in finished:
            self.jobs[i].discard(id(job))
            sent = self.sent[id(job)]
            self._stream(sent)
            if sent.fault == "stall":  # silent from here: cut at the stall timeout
                cut = self.clock.now + self.stall_timeout + self.rng.uniform(0, SPREAD_S)
                self._at(cut, "stalled", id(job))
                continue
            del self.sent[id(job)]
            if sent.fault == "ok":
                self._answered(sent)
            else:
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
                self._stream(self.sent[key])

    def _stream(self, sent: _Sent) -> None:
        """The events a paced stream has sent by now (a faulty one sends nothing until its
        engine is done, then half its answer: fake_stream.send_stream)."""
        job = sent.job
        if sent.fault != "ok" and job.generated < job.wanted:
            return
        share = 0.5 if sent.fault != "ok" else 1.0
        due = min(EVENTS - 1, int(EVENTS * share * job.generated // job.wanted))
        if due > sent.events:
            if sent.events == 0:
                sent.server.streams.count(-1)
            sent.server.stats.streamed_events += due - sent.events
            sent.events = due

    def _answered(self, sent: _Sent) -> None:
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

    def _failed(self, sent: _Sent, after_tokens: bool, stalled: bool = False) -> None:
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
        self._retry(sent.prompt, 1.0)

    def _retry(self, prompt: int, delay: float) -> None:
        self._retrying += 1
        self._at(self.clock.now + self.rng.uniform(0, delay), "retry", prompt)
