"""Where live concurrency reads a server's load: the engine's own /metrics (its running
batch, its queue, its preemptions and the output tokens it decoded), and, where the engine
counts no tokens of its own (no /metrics, or one without a token counter), the data events
its streamed answers brought so far. Either shows a level's output while its answers are
still in flight; the answers alone show it only a request's time later (tuning.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from regen.errors import PermanentError, RetryableError, ServerRefused
from regen.fleet.engine_metrics import EngineLoad, parse
from regen.fleet.server import Server, ServerStats

SCRAPE_TIMEOUT = 5.0
# Engines whose streams carry no usage (llama-cpp-python's server has no `stream_options`):
# their answers are not streamed to measure (a plain answer counts its tokens).
NO_STREAMED_USAGE = frozenset({"llamacpp"})
KV_GROWTH = 0.6  # a running request holds its prompt and, on average, this much of its answer


class LoadSource:
    def __init__(self, server: Server, clock: Callable[[], float] = time.monotonic) -> None:
        self.server = server
        self.clock = clock  # the controller's (a simulated fleet runs on its own)
        self.metrics = True  # the engine answers /metrics (until it does not)
        self.by_stream = False  # the last load's token counter was the streams' events
        self.read_at = 0.0  # when the last load came (a busy client reads it late: a window
        # is timed by its loads' arrivals, not by when it meant to read them)

    async def stream_if_uncounted(self, start: int) -> None:
        """Before the first request: an engine that counts no tokens has its answers
        streamed (where the request allows it: see Server.post), to count them as they come,
        if its level has room to climb from `start` (else there is no climb to measure)."""
        load = await self.read()
        if self.server.engine.name in NO_STREAMED_USAGE or self.server.concurrency <= start:
            return
        if load is None or load.generated is None:
            self.server.stream_to_measure = True

    async def read(self) -> EngineLoad | None:
        """The engine's load; where it counts no tokens and its answers are streamed, the
        events received stand for its counter (None: neither, measure from the answers)."""
        load = await self._engine_load()
        self.read_at = self.clock()
        server = self.server
        streamed = server.timeouts.stream or server.stream_to_measure
        self.by_stream = (load is None or load.generated is None) and streamed
        if self.by_stream:
            return replace(load or EngineLoad(), generated=server.stats.streamed_events)
        return load

    async def _engine_load(self) -> EngineLoad | None:
        if not self.metrics:
            return None
        try:
            return parse(await self.server.get_text("/metrics", SCRAPE_TIMEOUT))
        except (PermanentError, ServerRefused):
            self.metrics = False  # no /metrics here (a 404): measure from the answers
        except RetryableError:
            pass  # busy or away for a moment: this sample is skipped
        return None


def kv_fit(kv_tokens: int | None, stats: ServerStats) -> int | None:
    """Requests a stated KV cache of `kv_tokens` holds at the mix answered so far."""
    if not kv_tokens or not stats.completed:
        return None
    held = (stats.prompt_tokens + KV_GROWTH * stats.completion_tokens) / stats.completed
    return int(kv_tokens / held) if held > 0 else None
