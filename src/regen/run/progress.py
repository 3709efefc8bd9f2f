"""Run statistics, and the progress snapshot that `regen status` reads from any shell.

The snapshot is observability only; what is finished is always decided by the output files.
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regen.fleet.stats import ServerStats
from regen.format.state import RunState
from regen.jsonio import atomic_write_json
from regen.run.eta import remaining
from regen.run.quality import QualityMonitor

RATE_WINDOWS = {"last_1m": 60.0, "last_5m": 300.0, "last_15m": 900.0}


@dataclass
class RunStats:
    total: int  # (prompt, sample) pairs in the input, plus unusable lines
    finished_before: int  # already in the output files when this session started
    counted: bool = False  # `total` is the whole input's, counted (see regen.run.counts)
    unusable_lines: int | None = None  # of the whole input, once counted
    completed: int = 0
    failed: int = 0
    bad_lines: int = 0
    skipped: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors_by_type: Counter[str] = field(default_factory=Counter)
    settings: Counter[str] = field(default_factory=Counter)  # completions per sampling setting
    # per source: completions whose regenerated calls were compared with the dataset's, and
    # those where they differed (meta.turns[i].tool_calls_match false)
    tool_compared: Counter[str] = field(default_factory=Counter)
    tool_diverged: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.time)
    state: RunState = RunState.STARTING
    events: deque[str] = field(default_factory=lambda: deque(maxlen=20))
    events_total: int = 0
    end_game: dict[str, Any] | None = None  # the drain and copies, once the run is over
    _samples: deque[tuple[float, int, int]] = field(default_factory=deque)

    @property
    def finished(self) -> int:
        return self.finished_before + self.completed + self.failed + self.bad_lines

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.finished)

    def event(self, text: str) -> None:
        self.events.append(f"{time.strftime('%H:%M:%S')} {text}")
        self.events_total += 1

    def tick(self, now: float | None = None) -> None:
        """Record a (time, completions, tokens) sample for the rolling rates."""
        now = now or time.time()
        self._samples.append((now, self.completed, self.completion_tokens))
        horizon = now - max(RATE_WINDOWS.values()) - 5
        while len(self._samples) > 2 and self._samples[0][0] < horizon:
            self._samples.popleft()

    def rates(self, now: float | None = None) -> dict[str, dict[str, float]]:
        now = now or time.time()
        out = {}
        for name, span in RATE_WINDOWS.items():
            out[name] = self._rate_since(now - span, now)
        out["overall"] = self._rate(self.started, 0, 0, now)
        return out

    def _rate_since(self, since: float, now: float) -> dict[str, float]:
        base = next((s for s in self._samples if s[0] >= since), None)
        if base is None or now - base[0] < 10:  # too short a span to mean anything yet
            return self._rate(self.started, 0, 0, now)
        return self._rate(base[0], base[1], base[2], now)

    def _rate(self, t0: float, done0: int, tokens0: int, now: float) -> dict[str, float]:
        span = max(now - t0, 1e-6)
        return {
            "completions_per_s": round((self.completed - done0) / span, 3),
            "tokens_per_s": round((self.completion_tokens - tokens0) / span, 1),
        }

    def eta_seconds(self, now: float | None = None) -> float | None:
        return remaining(
            self.remaining, self.completed, self.completion_tokens, self.rates(now)
        ).seconds


def snapshot(
    stats: RunStats, servers: list, quality: QualityMonitor, extra: dict
) -> dict[str, Any]:
    now = time.time()
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "state": stats.state,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "updated_unix": now,
        "started_unix": stats.started,
        "total": stats.total,
        "total_counted": stats.counted,
        "unusable_lines": stats.unusable_lines,
        "finished": stats.finished,
        "remaining": stats.remaining,
        "session": {
            "finished_before": stats.finished_before,
            "completed": stats.completed,
            "failed": stats.failed,
            "bad_lines": stats.bad_lines,
            "already_done_in_input": stats.skipped,
            "prompt_tokens": stats.prompt_tokens,
            "completion_tokens": stats.completion_tokens,
        },
        "errors_by_type": dict(stats.errors_by_type),
        "sampling_mix": dict(stats.settings),
        "tool_calls_by_source": {
            name: {"compared": n, "diverged": stats.tool_diverged[name]}
            for name, n in sorted(stats.tool_compared.items())
        },
        "rates": stats.rates(),
        "eta_s": stats.eta_seconds(),
        "servers": [
            {
                "url": s.url,
                "state": s.breaker.state,
                "in_flight": s.in_flight,
                **concurrency_of(s),
                "completed": s.stats.completed,
                "failed": s.stats.failed,
                "completion_tokens": s.stats.completion_tokens,
                "latency_ewma_s": round(s.stats.latency_ewma, 3),
                "last_error": s.stats.last_error,
                "retried": s.stats.retried,
                "affinity_sends": s.stats.affinity_sends,
                "aborted": s.stats.aborted,
                "withdrawn": s.stats.withdrawn,
                "moved": s.stats.moved,
                "latency_counts": list(s.stats.latency_counts),
                "latency_sum_s": round(s.stats.latency_sum, 3),
                **_spec(s.stats),
            }
            for s in servers
        ],
        "quality": quality.snapshot(),
        "events": list(stats.events),
        "events_total": stats.events_total,
        **extra,
    }


def concurrency_of(server: Any) -> dict[str, Any]:
    """A server's level as progress.json and the manifest's sessions name it."""
    return {
        "concurrency": server.limit,  # the live level (or the fixed one)
        "concurrency_cap": server.concurrency,
        "concurrency_why": server.limit_reason,
    }


def write_snapshot(path: Path, data: dict[str, Any]) -> None:
    atomic_write_json(path, data)


def _spec(stats: ServerStats) -> dict[str, Any]:
    """The serving drafter's acceptance, only for a server that reported any."""
    if not stats.spec_steps:
        return {}
    return {
        "spec_steps": stats.spec_steps,
        "spec_accepted_tokens": stats.spec_accepted,
        "acceptance_length": round(stats.acceptance_length or 0.0, 4),
    }
