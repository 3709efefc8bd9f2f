"""A fake engine under load: the continuous-batching scheduler of fake_scheduler.py on a
scaled wall clock, for the fake HTTP server.

Time is simulated: a step that takes `t` simulated seconds sleeps `t * time_scale` real
seconds, and `ticks` decode steps run per sleep, so a GPU-like curve runs on two cores; a
tick that comes late is caught up, so a busy machine does not bend the curve. All
rates a client measures are in simulated units divided by `time_scale`; ratios are exact.
/metrics come in the engine's names, or none at all (`metrics=False`: an engine regen has
not met, whose load it can only judge from the answers).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from regen.testing.fake_scheduler import EngineCounters, EngineCurve, Job, Scheduler

__all__ = ["UNMET", "EngineCounters", "EngineCurve", "FakeEngine", "Job"]

CATCH_UP = 2.0  # wall seconds a late engine catches up on at most


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
class FakeEngine(Scheduler):
    _loop: asyncio.Task | None = None
    _wake: asyncio.Event | None = None
    _tick: asyncio.Future | None = None

    async def generate(self, prompt_tokens: list[str], wanted: int) -> int:
        """Queue one request; return once `wanted` tokens are decoded."""
        return await self.wait(self.submit(prompt_tokens, wanted))

    def submit(self, prompt_tokens: list[str], wanted: int) -> Job:
        """Queue one request (its `generated` grows as it decodes; `wait` for its end)."""
        if self._wake is None:
            self._wake = asyncio.Event()
        if self._loop is None or self._loop.done():
            self._loop = asyncio.ensure_future(self._run())
        job = self.add(prompt_tokens, wanted, asyncio.get_running_loop().create_future())
        self._wake.set()
        return job

    async def wait(self, job: Job) -> int:
        assert job.done is not None
        try:
            return await job.done
        finally:  # a client that went away is aborted, as the engines do
            self.drop(job)

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
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            if self.idle:
                self._wake.clear()
                await self._wake.wait()
                due = loop.time()
            seconds, finished = self.tick()
            for job in finished:
                if job.done is not None and not job.done.done():
                    job.done.set_result(job.generated)
            due = max(due + seconds * self.curve.time_scale, loop.time() - CATCH_UP)
            await asyncio.sleep(max(0.0, due - loop.time()))
            if self._tick is not None and not self._tick.done():
                self._tick.set_result(None)
