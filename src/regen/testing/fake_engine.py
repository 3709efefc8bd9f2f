"""A fake engine under load: a continuous-batching scheduler on a scaled clock.

What it models, as vLLM's v1 scheduler and SGLang's do in substance:
- a decode step whose time grows with the running batch (`step_s + per_seq_s * running`), so
  output tokens/s rises with requests in flight and then flattens;
- at most `max_running` requests decode at once (vLLM's max_num_seqs, SGLang's
  max_running_requests); the rest wait in a queue;
- a KV cache of `kv_tokens`: a waiting request is admitted only when its prompt fits; a
  running one that cannot grow is preempted (the newest first) and later recomputed from
  scratch, which costs prefill time again: past that point more in flight means less output;
- a prefix cache per server, in blocks of `block` tokens chained by hash (a block is cached
  only with everything before it): prefill time is `prefill_s` per *uncached* prompt token;
- /metrics in the engine's names, or none at all (`metrics=False`: an engine regen has not
  met, whose load it can only judge from the answers).

Time is simulated: a step that takes `t` simulated seconds sleeps `t * time_scale` real
seconds, and `ticks` decode steps run per sleep, so a GPU-like curve runs on two cores; a
tick that comes late is caught up, so a busy machine does not bend the curve. All
rates a client measures are in simulated units divided by `time_scale`; ratios are exact.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field

CATCH_UP = 2.0  # wall seconds a late engine catches up on at most


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


# An engine regen has not met (issue 34): no limit on running requests and so no queue, no
# /metrics, a decode step that slows with every running request, and a KV cache that holds
# about 290 requests of the benches' mix (60-word prompts, 400 +- 50% tokens: a running one
# holds about 260) and recomputes past it, a prefill costing as much a token as a decode
# (no spare compute). Output per engine second, 4,000 answers: 1,596 at 128 in flight,
# 1,740 at 192, 1,785 at 256, then 1,515 at 320, 1,435 at 400, 1,447 at 512 (the newest
# requests are preempted and prefilled again, over and over).
UNMET = EngineCurve(
    step_s=0.02,
    per_seq_s=0.0004,
    prefill_s=0.0004,
    max_running=1_000_000,
    kv_tokens=76_000,
    time_scale=0.5,
    metrics=False,
)


@dataclass(eq=False)
class _Request:
    blocks: list[int]  # chained hashes of the prompt's full blocks
    prompt: int
    wanted: int
    done: asyncio.Future
    generated: int = 0
    cached: int = 0  # prompt tokens found in the prefix cache at its (last) admission

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
class FakeEngine:
    curve: EngineCurve = field(default_factory=EngineCurve)
    counters: EngineCounters = field(default_factory=EngineCounters)
    waiting: list[_Request] = field(default_factory=list)
    running: list[_Request] = field(default_factory=list)
    _cache: OrderedDict[int, None] = field(default_factory=OrderedDict)  # LRU of block hashes
    _loop: asyncio.Task | None = None
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _prefill_owed: float = 0.0
    _tick: asyncio.Future | None = None

    @property
    def kv_used(self) -> int:
        return sum(r.footprint for r in self.running)

    @property
    def kv_usage(self) -> float:
        return min(1.0, self.kv_used / self.curve.kv_tokens)

    async def generate(self, prompt_tokens: list[str], wanted: int) -> int:
        """Queue one request; return once `wanted` tokens are decoded. Prompt tokens are
        words: only equal leading blocks of words share cache."""
        return await self.wait(self.submit(prompt_tokens, wanted))

    def submit(self, prompt_tokens: list[str], wanted: int) -> _Request:
        """Queue one request (its `generated` grows as it decodes; `wait` for its end)."""
        if self._loop is None or self._loop.done():
            self._loop = asyncio.ensure_future(self._run())
        done = asyncio.get_running_loop().create_future()
        blocks = _block_hashes(prompt_tokens, self.curve.block)
        request = _Request(blocks, max(1, len(prompt_tokens)), max(1, wanted), done)
        self.waiting.append(request)
        # Scheduled at once, as an engine does at its next step (not after this whole tick):
        # its prefill is paid in the next tick.
        self._prefill_owed += self._admit()
        self._wake.set()
        return request

    async def wait(self, request: _Request) -> int:
        try:
            return await request.done
        finally:  # a client that went away is aborted, as the engines do
            if request in self.waiting:
                self.waiting.remove(request)
            if request in self.running:
                self.running.remove(request)

    def next_tick(self) -> asyncio.Future:
        """Done after the engine's next simulated tick (a stream sends what it decoded)."""
        if self._tick is None or self._tick.done():
            self._tick = asyncio.get_running_loop().create_future()
        return self._tick

    async def _run(self) -> None:
        # The engine keeps to its own clock, as one on its own GPU does: each tick is due at
        # its scheduled wall time, and one that comes late (its process starved of CPU by a
        # busy client or machine) is caught up at once, not lost, so a client's load does not
        # bend the engine's curve (up to CATCH_UP s behind; beyond, the schedule starts anew).
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            if not self.waiting and not self.running:
                self._wake.clear()
                await self._wake.wait()
                due = loop.time()
            seconds, self._prefill_owed = self._decode() + self._prefill_owed, 0.0
            self.counters.clock += seconds
            due = max(due + seconds * self.curve.time_scale, loop.time() - CATCH_UP)
            await asyncio.sleep(max(0.0, due - loop.time()))
            if self._tick is not None and not self._tick.done():
                self._tick.set_result(None)

    def _admit(self) -> float:
        """Move waiting requests into the batch while their prompt fits; prefill time."""
        prefill = 0
        used = self.kv_used
        while self.waiting and len(self.running) < self.curve.max_running:
            request = self.waiting[0]
            if used + request.footprint > self.curve.kv_tokens and self.running:
                break
            self.waiting.pop(0)
            request.cached = self._lookup(request)
            prefill += request.footprint - request.cached
            used += request.footprint
            self.running.append(request)
        self.counters.prompt_tokens += prefill
        return prefill * self.curve.prefill_s

    def _lookup(self, request: _Request) -> int:
        """Cached prompt tokens (whole leading blocks), then cache the prompt's blocks."""
        hits = 0
        for block in request.blocks:
            if block not in self._cache:
                break
            hits += 1
        for block in request.blocks:
            self._cache[block] = None
            self._cache.move_to_end(block)
        while len(self._cache) * self.curve.block > self.curve.kv_tokens:
            self._cache.popitem(last=False)
        cached = min(hits * self.curve.block, request.prompt - 1)
        if request.generated == 0:  # a recompute is no new query (vLLM counts it again;
            self.counters.prefix_queries += request.prompt  # its rate barely moves)
            self.counters.prefix_hits += cached
        return cached

    def _decode(self) -> float:
        """`ticks` decode steps of the running batch, preempting when the KV cache is full."""
        seconds = 0.0
        for _ in range(self.curve.ticks):
            seconds += self._admit()  # before every step, as the engines schedule
            if not self.running:
                break
            while self.kv_used + len(self.running) > self.curve.kv_tokens and len(self.running) > 1:
                self._preempt(self.running.pop())
            seconds += self.curve.step_s + self.curve.per_seq_s * len(self.running)
            for request in self.running:
                request.generated += 1
            self.counters.generation_tokens += len(self.running)
            self._finish()
        return seconds

    def _preempt(self, request: _Request) -> None:
        """Recompute: its KV is dropped and it waits at the front (vLLM's v1 policy)."""
        self.counters.preemptions += 1
        self.waiting.insert(0, request)

    def _finish(self) -> None:
        still = []
        for request in self.running:
            if request.generated >= request.wanted:
                self.counters.finished += 1
                if not request.done.done():
                    request.done.set_result(request.generated)
            else:
                still.append(request)
        self.running = still


Job = _Request  # what `submit` returns: a request's progress (`generated` of `wanted`)


def _block_hashes(tokens: list[str], block: int) -> list[int]:
    """One hash per full block, each over its block and the hash before it (a block is
    cached only with its whole prefix, as in vLLM's and SGLang's caches)."""
    hashes, previous = [], 0
    for start in range(0, len(tokens) - block + 1, block):
        previous = hash((previous, *tokens[start : start + block]))
        hashes.append(previous)
    return hashes
