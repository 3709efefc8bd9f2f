"""Watch the server processes regen started: a server that exits is seen at once, reported
with its exit code or signal and the last lines of its log, and restarted in place (same port,
same command) with backoff. One that keeps dying is given up on, with the report and the fix.

The same supervisor serves `regen generate` (its embedded server) and `regen serve
--restart-dead`; `step()` never blocks for long, so either can call it in its own loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from regen.serve.process import ExitReport, ServerProcess


@dataclass(frozen=True)
class RestartPolicy:
    """`max_restarts` restarts within `window` seconds; a server that then stays up for a whole
    window has its count forgiven, so a three-day run survives a crash a day."""

    max_restarts: int = 3
    backoff: float = 1.0  # 1 s, 2 s, 4 s ...
    window: float = 600.0
    startup_timeout: float = 600.0


@dataclass
class _Watch:
    process: ServerProcess
    state: str = "ready"  # ready | waiting (to restart) | starting | dead
    deaths: list[float] = field(default_factory=list)  # monotonic times of recent exits
    restart_at: float = 0.0
    ready_by: float = 0.0
    last_report: ExitReport | None = None


@dataclass(frozen=True)
class Change:
    """Something that happened to one server: `kind` is exited | restarted | ready | dead."""

    kind: str
    process: ServerProcess
    text: str
    report: ExitReport | None = None


class Supervisor:
    def __init__(
        self,
        processes: list[ServerProcess],
        policy: RestartPolicy | None = None,
        ready_check: Callable[[ServerProcess], bool] | None = None,
    ) -> None:
        self.policy = policy or RestartPolicy()
        self._watches = [_Watch(p) for p in processes]
        self._ready_check = ready_check or ServerProcess.answers

    @property
    def all_dead(self) -> bool:
        return all(w.state == "dead" for w in self._watches)

    def step(self, now: float | None = None) -> list[Change]:
        """Look at every server once: notice exits, start due restarts, confirm readiness."""
        now = time.monotonic() if now is None else now
        changes: list[Change] = []
        for watch in self._watches:
            if watch.state in ("ready", "starting"):
                report = watch.process.exited()
                if report is not None:
                    changes += self._on_exit(watch, report, now)
                    continue
            if watch.state == "waiting" and now >= watch.restart_at:
                watch.process.restarts += 1
                watch.process.start()
                watch.state, watch.ready_by = "starting", now + self.policy.startup_timeout
                changes.append(Change("restarted", watch.process, self._restarted(watch)))
            elif watch.state == "starting":
                changes += self._check_starting(watch, now)
        return changes

    def _on_exit(self, watch: _Watch, report: ExitReport, now: float) -> list[Change]:
        watch.last_report = report
        watch.deaths = [t for t in watch.deaths if now - t < self.policy.window] + [now]
        exited = Change("exited", watch.process, report.summary, report)
        if len(watch.deaths) > self.policy.max_restarts:
            watch.state = "dead"
            text = (
                f"server {watch.process.spec.name} died {len(watch.deaths)} times within "
                f"{self.policy.window:.0f}s; not restarting it. Last: {report.how}"
            )
            return [exited, Change("dead", watch.process, text, report)]
        delay = self.policy.backoff * 2 ** (len(watch.deaths) - 1)
        watch.state, watch.restart_at = "waiting", now + delay
        return [exited]

    def _check_starting(self, watch: _Watch, now: float) -> list[Change]:
        if self._ready_check(watch.process):
            watch.state = "ready"
            text = f"server {watch.process.spec.name} is back and answers"
            return [Change("ready", watch.process, text)]
        if now > watch.ready_by:
            watch.process.stop()
            watch.state = "dead"
            text = (
                f"server {watch.process.spec.name} did not answer within "
                f"{self.policy.startup_timeout:.0f}s of its restart; not restarting it"
            )
            return [Change("dead", watch.process, text, watch.last_report)]
        return []

    def _restarted(self, watch: _Watch) -> str:
        spec = watch.process.spec
        return (
            f"restarting server {spec.name} on port {spec.port} "
            f"(restart {len(watch.deaths)} of at most {self.policy.max_restarts} "
            f"in {self.policy.window:.0f}s)"
        )
