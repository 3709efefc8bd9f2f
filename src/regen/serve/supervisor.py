"""Watch the server processes regen started: a server that exits is seen at once, reported
with its exit code or signal and the last lines of its log, and restarted in place (same port,
same command) with backoff. One that keeps dying is given up on, with the report and the fix.

This is the state machine only; `serve/keeper.py` owns the processes and calls `step()` for
both `regen generate` (its embedded server) and `regen serve --restart-dead`.

A watched server moves only along these arrows (`TRANSITIONS`, checked on every move):

    READY ----exit----> WAITING ---backoff over---> STARTING ---answers---> READY
      |                    ^                           |
      |                    +-----------exit------------+
      +--exit, too many--> DEAD <--exit too many, or no answer by the startup timeout--+
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from regen.serve.process import ExitReport, ServerProcess


class WatchState(StrEnum):
    READY = "ready"  # running and answering
    WAITING = "waiting"  # exited; restarts when its backoff is over
    STARTING = "starting"  # restarted; not answering yet
    DEAD = "dead"  # given up on: never restarted again

    @property
    def running(self) -> bool:
        """A process exists whose exit must be noticed."""
        return self in (WatchState.READY, WatchState.STARTING)


TRANSITIONS: dict[WatchState, frozenset[WatchState]] = {
    WatchState.READY: frozenset({WatchState.WAITING, WatchState.DEAD}),
    WatchState.WAITING: frozenset({WatchState.STARTING}),
    WatchState.STARTING: frozenset({WatchState.READY, WatchState.WAITING, WatchState.DEAD}),
    WatchState.DEAD: frozenset(),
}


class ChangeKind(StrEnum):
    EXITED = "exited"  # the process ended (it may be restarted)
    RESTARTED = "restarted"  # a new process runs on the same port (new pid)
    READY = "ready"  # a restarted server answers again
    DEAD = "dead"  # given up on: the report says why


@dataclass(frozen=True)
class RestartPolicy:
    """`max_restarts` restarts within `window` seconds; a server that then stays up for a whole
    window has its count forgiven, so a three-day run survives a crash a day.

    `backoff`: seconds from the first exit to its restart; each further exit in the window
    doubles it (1, 2, 4 s by default), so a crash loop does not spin. Tests shorten it.
    `startup_timeout`: seconds a restarted server has to answer before it is given up on."""

    max_restarts: int = 3
    backoff: float = 1.0
    window: float = 600.0
    startup_timeout: float = 600.0


@dataclass
class _Watch:
    process: ServerProcess
    state: WatchState = WatchState.READY
    deaths: list[float] = field(default_factory=list)  # monotonic times of recent exits
    restart_at: float = 0.0
    ready_by: float = 0.0
    last_report: ExitReport | None = None

    def move(self, to: WatchState) -> None:
        if to not in TRANSITIONS[self.state]:
            raise AssertionError(f"server watch cannot go from {self.state} to {to}")
        self.state = to


@dataclass(frozen=True)
class Change:
    """Something that happened to one server."""

    kind: ChangeKind
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
        return all(w.state is WatchState.DEAD for w in self._watches)

    def step(self, now: float | None = None) -> list[Change]:
        """Look at every server once: notice exits, start due restarts, confirm readiness.
        Never blocks for long (one readiness check per starting server)."""
        now = time.monotonic() if now is None else now
        changes: list[Change] = []
        for watch in self._watches:
            if watch.state.running:
                report = watch.process.exited()
                if report is not None:
                    changes += self._on_exit(watch, report, now)
                    continue
            if watch.state is WatchState.WAITING and now >= watch.restart_at:
                watch.process.restarts += 1
                watch.process.start()
                watch.move(WatchState.STARTING)
                watch.ready_by = now + self.policy.startup_timeout
                changes.append(Change(ChangeKind.RESTARTED, watch.process, self._restarted(watch)))
            elif watch.state is WatchState.STARTING:
                changes += self._check_starting(watch, now)
        return changes

    def _on_exit(self, watch: _Watch, report: ExitReport, now: float) -> list[Change]:
        watch.last_report = report
        watch.deaths = [t for t in watch.deaths if now - t < self.policy.window] + [now]
        exited = Change(ChangeKind.EXITED, watch.process, report.summary, report)
        if len(watch.deaths) > self.policy.max_restarts:
            watch.move(WatchState.DEAD)
            text = (
                f"server {watch.process.spec.name} died {len(watch.deaths)} times within "
                f"{self.policy.window:.0f}s; not restarting it. Last: {report.how}"
            )
            return [exited, Change(ChangeKind.DEAD, watch.process, text, report)]
        watch.move(WatchState.WAITING)
        watch.restart_at = now + self.policy.backoff * 2 ** (len(watch.deaths) - 1)
        return [exited]

    def _check_starting(self, watch: _Watch, now: float) -> list[Change]:
        if self._ready_check(watch.process):
            watch.move(WatchState.READY)
            text = f"server {watch.process.spec.name} is back and answers"
            return [Change(ChangeKind.READY, watch.process, text)]
        if now > watch.ready_by:
            watch.process.stop()
            watch.move(WatchState.DEAD)
            text = (
                f"server {watch.process.spec.name} did not answer within "
                f"{self.policy.startup_timeout:.0f}s of its restart; not restarting it"
            )
            return [Change(ChangeKind.DEAD, watch.process, text, watch.last_report)]
        return []

    def _restarted(self, watch: _Watch) -> str:
        spec = watch.process.spec
        return (
            f"restarting server {spec.name} on port {spec.port} "
            f"(restart {len(watch.deaths)} of at most {self.policy.max_restarts} "
            f"in {self.policy.window:.0f}s)"
        )
