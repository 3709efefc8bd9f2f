"""The embedded default: a real llama.cpp server (llama-cpp-python) on a free loopback port.

It is exactly `regen serve --engine llamacpp --replicas 1` (one way to start and watch a
server, not two), used through the same HTTP path as any remote server. generate owns it: it
dies with generate (even on kill -9), a leftover from a killed run of the same output
directory is stopped first, and a supervisor restarts it in place if it exits mid-run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from regen.embedded_model import EMBEDDED_MODEL_NAME, SMOLLM2_FILE, default_model_path
from regen.errors import ConfigError, FleetUnavailable
from regen.fleet.dispatch import Fleet
from regen.fleet.server import Server
from regen.serve.control import stop_fleet
from regen.serve.fleetfile import FleetFile
from regen.serve.launch import ServeSpec, fleet_file, free_port, plan_servers, start_all
from regen.serve.process import ServerProcess
from regen.serve.supervisor import Change, RestartPolicy, Supervisor

__all__ = ["EMBEDDED_MODEL_NAME", "EmbeddedFleet", "default_model_path", "free_port"]


def embedded_spec(model_path: Path, run_dir: Path) -> ServeSpec:
    if not model_path.is_file():
        raise ConfigError(f"--local-model {model_path} does not exist", hint="check the path")
    served = EMBEDDED_MODEL_NAME if model_path.name == SMOLLM2_FILE else model_path.stem
    return ServeSpec(
        engine="llamacpp", model=str(model_path), served_name=served,
        log_dir=run_dir / "servers", replicas=1, threads=2, context=2048,
        startup_timeout=120.0,
    )  # fmt: skip


class EmbeddedFleet:
    """The servers generate starts for itself, with their supervisor. A context manager:
    on exit every server is stopped by its pid."""

    def __init__(self, spec: ServeSpec, policy: RestartPolicy | None = None) -> None:
        self.spec = spec
        self.policy = policy or RestartPolicy(startup_timeout=spec.startup_timeout)
        self.record = spec.log_dir / "FLEET.json"  # so the next run can clean up after a kill
        self.processes: list[ServerProcess] = []
        self.supervisor: Supervisor | None = None

    @property
    def urls(self) -> list[str]:
        return [p.spec.url for p in self.processes]

    def __enter__(self) -> EmbeddedFleet:
        if self.record.exists():
            stop_fleet(FleetFile.read(self.record))  # a server left by a killed earlier run
        launches = plan_servers(self.spec)
        self.processes = start_all(launches, self.spec.startup_timeout, tied=True)
        fleet_file(self.spec, self.processes).write(self.record)
        self.supervisor = Supervisor(self.processes, self.policy)
        return self

    def refresh_record(self) -> None:
        """After a restart the pid changed: keep the record true for the next run's cleanup."""
        fleet_file(self.spec, self.processes).write(self.record)

    async def watch(
        self, fleet: Fleet, servers: list[Server], on_event: Callable[[str], None]
    ) -> None:
        """Run until cancelled. An exit is seen within a fraction of a second; the server is
        taken out at once (its requests move on), restarted in place, and put back when it
        answers. One that keeps dying is retired, which stops the run when none is left."""
        assert self.supervisor is not None, "watch() needs a started fleet"
        by_process = dict(zip(self.processes, servers, strict=True))
        while True:
            for change in self.supervisor.step():
                server = by_process[change.process]
                if change.kind == "exited":
                    fleet.take_out(server, change.text, abort_in_flight=True)
                elif change.kind == "restarted":
                    on_event(change.text)
                    self.refresh_record()
                elif change.kind == "ready":
                    fleet.bring_back(server, "restarted and answers")
                else:
                    fleet.retire(server, _gone_for_good(change))
            await asyncio.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for process in self.processes:
            process.stop()
        self.record.unlink(missing_ok=True)


def _gone_for_good(change: Change) -> FleetUnavailable:
    """What the run says when its server will not come back: the report and the fix."""
    if change.report is None:
        return FleetUnavailable(change.text, hint="see the server's log")
    return FleetUnavailable(f"{change.text}\n{change.report.describe()}", hint=change.report.fix)
