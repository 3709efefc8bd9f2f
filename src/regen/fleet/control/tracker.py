"""One server's measurement window for the live concurrency (tuning.py): the engine's readings
and the server's counts since it opened, and the Window they make for `concurrency.decide`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from regen.fleet.control.level import Level, Window
from regen.fleet.engine_metrics import EngineLoad
from regen.fleet.load_source import LoadSource, kv_fit
from regen.fleet.server import Server

AGED = 1.0  # a window that ends this many request times after its level's change is aged


@dataclass
class Tracker:
    """One server's measurement window: what was read in it, and the Window it makes."""

    server: Server
    level: Level
    started: float = 0.0
    counting_from: float = 0.0
    measured_from: float = 0.0  # when `first` came (a starved client reads late)
    last_at: float = 0.0  # when `last` came
    first: EngineLoad | None = None
    tokens_at: int = 0
    answers_at: int = 0
    load_failures_at: int = 0
    sent_at: int = 0  # requests sent to it when the window opened
    busy: list[float] = field(default_factory=list)
    waiting: list[float] = field(default_factory=list)
    running: list[float] = field(default_factory=list)
    awaiting: list[int] = field(default_factory=list)  # streams without a first token yet
    samples: list[tuple[float, float]] = field(default_factory=list)  # (when, tokens so far)
    late: float = 0.0  # the longest the client's loop woke up late in the window (s)
    went_down: bool = False
    last: EngineLoad | None = None
    kv_tokens: int | None = None  # what the engine states its KV cache holds
    decoding: bool = False  # the engine's counter has shown its first tokens
    young: bool = False  # this window is a first climb's doubling's (level.young)
    room: bool = False  # a step up far under what the engine's stated cache holds
    warming: bool = False  # a high start: no window until its first requests turned over
    peer_levels_tried: set[int] = field(default_factory=set)  # (peers.follow)
    clock: Callable[[], float] = time.monotonic
    source: LoadSource = field(init=False)

    def __post_init__(self) -> None:
        self.source = LoadSource(self.server, self.clock)

    def decoded(self) -> float | None:
        """Output tokens the engine's counter shows in the window so far (None: no counter)."""
        first, last = self.first, self.last
        if first is None or last is None or first.generated is None or last.generated is None:
            return None
        return last.generated - first.generated

    def rate_so_far(self) -> float | None:
        """Output tokens/s by the engine's counter since the window started counting (None:
        no counter, or no reading after its first)."""
        decoded, seconds = self.decoded(), self.last_at - self.measured_from
        return decoded / seconds if decoded is not None and seconds > 0 else None

    def steps(self) -> float:
        """Decode steps the engine ran in the window (its tokens over its batch; by the
        streams, events a stream); without a counter, as many as needed (the window is then
        whole request times)."""
        decoded = self.decoded()
        if decoded is None:
            return float("inf")
        return decoded / max(1.0, mean(self.running) or self.server.in_flight)

    def measure(self, now: float) -> Window:
        first, last, server = self.first, self.last, self.server
        engine = first is not None and last is not None
        seconds = self.last_at - self.measured_from if engine else now - self.counting_from
        tokens = self.decoded()
        if tokens is None:
            tokens = server.stats.completion_tokens - self.tokens_at
        preempted = None
        if engine and first.preemptions is not None and last.preemptions is not None:
            preempted = int(last.preemptions - first.preemptions)
        busy = sum(self.busy) / len(self.busy)
        # A young window that ran a request's time has seen the level's requests age.
        # (Far under what a stated cache holds, there is nothing to age: `room`.)
        aged = not self.young or self.room or now - self.started >= AGED * server.stats.latency_ewma
        # At its shortest: a queue that drains between steps (prompts waiting for their turn
        # in a step's token budget, as vLLM's CPU build queues them) is no full server.
        waiting, running = (min(self.waiting), mean(self.running)) if self.waiting else (None, None)
        if waiting is None and self.source.by_stream and self.awaiting and aged:
            # No engine gauge: its queue as the client sees it, streams still waiting for
            # their first token all window long (admitted ones decode; aged: none is new).
            waiting = min(self.awaiting)
            running = max(0.0, busy * server.limit - waiting)
        return Window(
            seconds=seconds,
            tokens=tokens,
            busy=busy,
            errors=server.stats.load_failures - self.load_failures_at,
            requests=server.stats.sent - self.sent_at,
            preemptions=preempted,
            waiting=waiting,
            running=running,
            kv_fit=kv_fit(self.kv_tokens or (last.kv_tokens if last else None), server.stats),
            aged=aged,
            short=self.young,
        )


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
