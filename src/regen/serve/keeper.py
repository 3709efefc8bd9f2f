"""The one place that starts, watches and restarts the server processes regen runs.

`regen serve` (in the foreground with --restart-dead, or not) and the embedded server of
`regen generate` are both a `ServerKeeper`: it brings every server up, keeps FLEET.json true
(a restart changes a pid), steps the supervisor, and stops every process by its pid. The
users only decide what a change means to them (print it; or take a server out of the
dispatch rotation and put it back).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

from regen.errors import RegenError
from regen.serve.control import stop_fleet
from regen.serve.fleetfile import FleetSupervisor
from regen.serve.launch import ServeSpec, fleet_file, plan_servers, start_all
from regen.serve.process import LaunchSpec, ServerProcess
from regen.serve.supervisor import Change, ChangeKind, RestartPolicy, Supervisor

OnChange = Callable[[Change], None]


class ServerKeeper:
    """`tied`: the servers die with this process (the kernel kills them, even on kill -9)."""

    def __init__(
        self,
        spec: ServeSpec,
        record: Path,
        tied: bool,
        policy: RestartPolicy | None = None,
        supervised_by: FleetSupervisor | None = None,
    ) -> None:
        self.spec = spec
        self.supervised_by = supervised_by  # named in FLEET.json, for `regen serve --stop`
        self.record = record
        self.tied = tied
        self.policy = policy or RestartPolicy(startup_timeout=spec.startup_timeout)
        self.processes: list[ServerProcess] = []
        self.supervisor: Supervisor | None = None

    @property
    def urls(self) -> list[str]:
        return [p.spec.url for p in self.processes]

    def plan(self) -> list[LaunchSpec]:
        """Preflight and the launch of every server (nothing is started yet)."""
        return plan_servers(self.spec)

    def start(self, launches: list[LaunchSpec] | None = None) -> None:
        """Start every server, wait until each answers, write FLEET.json."""
        self.processes = start_all(launches or self.plan(), self.spec.startup_timeout, self.tied)
        try:
            self.write_record()
        except RegenError:  # unrecorded, `regen serve --stop` could never find them
            self.stop(forget=False)
            raise
        self.supervisor = Supervisor(self.processes, self.policy)

    def stop_leftover(self) -> None:
        """Stop the servers an earlier, killed run left behind (named in its FLEET.json)."""
        if self.record.exists():
            stop_fleet(self.record)

    def write_record(self, stopped_at: str | None = None) -> None:
        record = fleet_file(self.spec, self.processes)
        record.supervisor, record.stopped_at = self.supervised_by, stopped_at
        record.write(self.record)

    @property
    def all_dead(self) -> bool:
        return self.supervisor is not None and self.supervisor.all_dead

    def poll(self) -> list[Change]:
        """Step the supervisor once; a restart rewrites FLEET.json with the new pid."""
        assert self.supervisor is not None, "poll() needs started servers"
        changes = self.supervisor.step()
        if any(c.kind is ChangeKind.RESTARTED for c in changes):
            self.write_record()
        return changes

    async def watch(self, on_change: OnChange, interval: float = 0.2) -> None:
        """Poll until cancelled (from an event loop)."""
        while True:
            for change in self.poll():
                on_change(change)
            await asyncio.sleep(interval)

    def supervise(self, stop: threading.Event, on_change: OnChange, interval: float = 0.5) -> None:
        """Poll in the foreground until `stop` is set or every server is dead for good."""
        while not stop.is_set() and not self.all_dead:
            for change in self.poll():
                on_change(change)
            stop.wait(interval)

    def stop(self, forget: bool) -> None:
        """Stop every server by its pid, all at once (a fleet of N stops in the time of one);
        `forget` removes FLEET.json too."""
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.stop()
        if forget:
            self.record.unlink(missing_ok=True)
