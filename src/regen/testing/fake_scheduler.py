"""A continuous-batching scheduler as a plain object: requests in, decode steps out, no clock
of its own. The HTTP fake (fake_engine.FakeEngine) runs it on a scaled wall clock; the
virtual-time fleet (sim_fleet.py) runs it in simulated seconds. Both see the same curve.

What it models, as vLLM's v1 scheduler and SGLang's do in substance:
- a decode step whose time grows with the running batch (`step_s + per_seq_s * running`,
  plus `per_seq2_s * running**2` for an engine whose steps slow faster than its batch grows,
  as a CPU engine past its cores), so output tokens/s rises with requests in flight and
  then flattens (or falls);
- at most `max_running` requests decode at once (vLLM's max_num_seqs, SGLang's
  max_running_requests); the rest wait in a queue;
- a KV cache of `kv_tokens`: a waiting request is admitted only when its prompt fits; a
  running one that cannot grow is preempted (the newest first) and later recomputed from
  scratch at `recompute_s` a token (default `prefill_s`): how hard the cliff past the cache
  bites, from a mild dip to thrashing;
- a prefix cache, in blocks of `block` tokens chained by hash (a block is cached only with
  everything before it): prefill time is `prefill_s` per *uncached* prompt token.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import OrderedDict
from dataclasses import dataclass, field


@dataclass(frozen=True)
class EngineCurve:
    step_s: float = 0.02  # one decode step of a batch of one
    per_seq_s: float = 0.0001  # added per running request
    prefill_s: float = 0.00005  # per uncached prompt token
    max_running: int = 256
    kv_tokens: int = 200_000
    block: int = 16
    time_scale: float = 0.1  # real seconds per simulated second
    ticks: int = 4  # decode steps simulated per sleep (cheap on the CPU)
    metrics: bool = True  # serves /metrics (else a 404, as an engine without the endpoint)
    recompute_s: float | None = None  # per token of a preempted request's recompute
    per_seq2_s: float = 0.0  # added per running request, squared

    def step_seconds(self, running: int) -> float:
        return self.step_s + self.per_seq_s * running + self.per_seq2_s * running * running


@dataclass(eq=False)
class Job:
    """One request's progress: `generated` of `wanted` tokens."""

    blocks: list[int]  # chained hashes of the prompt's full blocks
    prompt: int
    wanted: int
    done: asyncio.Future | None = None  # set when it finishes (the HTTP fake's)
    cached: int = 0  # prompt tokens found in the prefix cache at its (last) admission
    preempted: int = 0  # times it was preempted
    made: int = 0  # tokens decoded before its present run in the batch
    engine: Scheduler | None = None  # while it runs: whose steps it decodes at
    since: int = 0  # the engine's step count when its present run began
    end: int = 0  # ... and the step count at which it will be done

    @property
    def generated(self) -> int:
        return self.made + (self.engine.steps - self.since if self.engine else 0)

    @property
    def footprint(self) -> int:
        return self.prompt + self.generated


@dataclass
class EngineCounters:
    """What the engine's /metrics reports (see metrics_text in fake_metrics.py)."""

    generation_tokens: int = 0
    prompt_tokens: int = 0
    prefix_queries: int = 0  # prompt tokens looked up in the prefix cache
    prefix_hits: int = 0  # of which found
    preemptions: int = 0
    finished: int = 0
    clock: float = 0.0  # simulated seconds the engine has been busy


@dataclass(eq=False)
class Scheduler:
    """The scheduler. Every running request decodes a token a step, so a request's progress
    is kept as the step count it joined at (`Job.since`), and the ends in a heap: a step
    costs nothing a request, and a thousand 8,000-token answers run on the CPU of a few."""

    curve: EngineCurve = field(default_factory=EngineCurve)
    counters: EngineCounters = field(default_factory=EngineCounters)
    waiting: list[Job] = field(default_factory=list)
    running: dict[Job, None] = field(default_factory=dict)  # in the order they joined
    _cache: OrderedDict[int, None] = field(default_factory=OrderedDict)  # LRU of block hashes
    prefill_owed: float = 0.0  # seconds of prefill admitted since the last tick
    kv_used: int = 0  # tokens the running requests hold (their footprints' sum)
    steps: int = 0  # decode steps so far
    _ends: list[tuple[int, int, Job]] = field(default_factory=list)  # (end, order, job)
    _joined: int = 0
    _finished: list[Job] = field(default_factory=list)  # since the last tick

    @property
    def kv_usage(self) -> float:
        return min(1.0, self.kv_used / self.curve.kv_tokens)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    def add(self, prompt_tokens: list[str], wanted: int, done: asyncio.Future | None = None) -> Job:
        """Queue one request, scheduled at once as an engine does at its next step (its
        prefill is paid in the next tick). Prompt tokens are words: only equal leading
        blocks of words share cache."""
        blocks = _block_hashes(prompt_tokens, self.curve.block)
        job = Job(blocks, max(1, len(prompt_tokens)), max(1, wanted), done)
        self.waiting.append(job)
        self.prefill_owed += self._admit()
        return job

    def drop(self, job: Job) -> None:
        """A request whose client went away: aborted, as the engines do."""
        if job in self.waiting:
            self.waiting.remove(job)
        if job in self.running:
            self._leave(job)

    def tick(self) -> tuple[float, list[Job]]:
        """`ticks` decode steps of the running batch: their simulated seconds (the prefills
        owed included) and the requests that finished."""
        seconds, self.prefill_owed = self._decode() + self.prefill_owed, 0.0
        self.counters.clock += seconds
        finished, self._finished = self._finished, []
        return seconds, finished

    def _admit(self) -> float:
        """Move waiting requests into the batch while their prompt fits; prefill time."""
        prefill, recompute = 0, 0
        while self.waiting and len(self.running) < self.curve.max_running:
            job = self.waiting[0]
            if self.kv_used + job.footprint > self.curve.kv_tokens and self.running:
                break
            self.waiting.pop(0)
            job.cached = self._lookup(job)
            if job.made:
                recompute += job.footprint - job.cached
            else:
                prefill += job.footprint - job.cached
            self._join(job)
        self.counters.prompt_tokens += prefill + recompute
        per_token = (
            self.curve.prefill_s if self.curve.recompute_s is None else self.curve.recompute_s
        )
        return prefill * self.curve.prefill_s + recompute * per_token

    def _join(self, job: Job) -> None:
        self.kv_used += job.footprint
        job.engine, job.since, job.end = self, self.steps, self.steps + job.wanted - job.made
        self.running[job] = None
        self._joined += 1
        heapq.heappush(self._ends, (job.end, self._joined, job))

    def _leave(self, job: Job) -> None:
        """Out of the batch (done, preempted or dropped): its progress kept, its KV freed."""
        self.kv_used -= job.footprint
        job.made, job.engine = job.generated, None
        del self.running[job]

    def _lookup(self, job: Job) -> int:
        """Cached prompt tokens (whole leading blocks), then cache the prompt's blocks."""
        hits = 0
        for block in job.blocks:
            if block not in self._cache:
                break
            hits += 1
        for block in job.blocks:
            self._cache[block] = None
            self._cache.move_to_end(block)
        while len(self._cache) * self.curve.block > self.curve.kv_tokens:
            self._cache.popitem(last=False)
        cached = min(hits * self.curve.block, job.prompt - 1)
        if job.made == 0:  # a recompute is no new query (vLLM counts it again;
            self.counters.prefix_queries += job.prompt  # its rate barely moves)
            self.counters.prefix_hits += cached
        return cached

    def _decode(self) -> float:
        """`ticks` decode steps, preempting when the KV cache is full. Steps between two
        events (a request finishing, the cache filling) are taken at once: the batch and
        each step's time stay the same over them."""
        seconds, left = 0.0, self.curve.ticks
        while left > 0:
            seconds += self._admit()  # before every step, as the engines schedule
            if not self.running:
                break
            kv, preempted = self.curve.kv_tokens, self.counters.preemptions
            while self.kv_used + len(self.running) > kv and len(self.running) > 1:
                self._preempt(next(reversed(self.running)))  # the newest
            n = len(self.running)
            steps = min(left, self._next_end() - self.steps, (kv - self.kv_used) // n)
            if self.counters.preemptions > preempted:
                steps = 1  # the space freed may take a waiting request back at the next step
            steps = max(1, steps)
            seconds += steps * self.curve.step_seconds(n)
            self.steps += steps
            self.kv_used += steps * n
            self.counters.generation_tokens += steps * n
            left -= steps
            self._finish()
        return seconds

    def _next_end(self) -> int:
        """The step count at which the first running request is done (stale ends dropped:
        a request preempted or dropped since it was pushed)."""
        while True:
            end, _, job = self._ends[0]
            if job in self.running and job.end == end:
                return end
            heapq.heappop(self._ends)

    def _preempt(self, job: Job) -> None:
        """Recompute: its KV is dropped and it waits at the front (vLLM's v1 policy)."""
        self.counters.preemptions += 1
        job.preempted += 1
        self._leave(job)
        self.waiting.insert(0, job)

    def _finish(self) -> None:
        while self._ends and self._ends[0][0] <= self.steps:
            _, _, job = heapq.heappop(self._ends)
            if job in self.running and job.end <= self.steps:
                self._leave(job)
                self.counters.finished += 1
                self._finished.append(job)


def _block_hashes(tokens: list[str], block: int) -> list[int]:
    """One hash per full block, each over its block and the hash before it (a block is
    cached only with its whole prefix, as in vLLM's and SGLang's caches)."""
    hashes, previous = [], 0
    for start in range(0, len(tokens) - block + 1, block):
        previous = hash((previous, *tokens[start : start + block]))
        hashes.append(previous)
    return hashes
