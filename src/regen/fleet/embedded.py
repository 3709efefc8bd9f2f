"""The embedded default: a real llama.cpp server (llama-cpp-python) on a free loopback port.

It is exactly `regen serve --engine llamacpp --replicas 1` (one way to start and watch a
server, not two), used through the same HTTP path as any remote server. generate owns it: it
dies with generate (even on kill -9), a leftover from a killed run of the same output
directory is stopped first, and a supervisor restarts it in place if it exits mid-run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from regen.embedded_model import EMBEDDED_MODEL_NAME, SMOLLM2_FILE, default_model_path
from regen.errors import ConfigError, FleetUnavailable
from regen.fleet.dispatch import Fleet
from regen.fleet.server import Server
from regen.serve.keeper import ServerKeeper
from regen.serve.launch import ServeSpec, free_port
from regen.serve.supervisor import Change, ChangeKind, RestartPolicy

__all__ = ["EMBEDDED_MODEL_NAME", "EmbeddedFleet", "default_model_path", "free_port"]


SERVER_LOGS = "servers"  # the run's folder of the embedded server's logs and FLEET.json


def embedded_spec(model_path: Path, run_dir: Path) -> ServeSpec:
    if not model_path.is_file():
        raise ConfigError(f"--local-model {model_path} does not exist", hint="check the path")
    served = EMBEDDED_MODEL_NAME if model_path.name == SMOLLM2_FILE else model_path.stem
    return ServeSpec(
        engine="llamacpp",
        model=str(model_path),
        served_name=served,
        log_dir=run_dir / SERVER_LOGS,
        replicas=1,
        threads=2,
        context=2048,
        startup_timeout=120.0,
    )


class EmbeddedFleet:
    """The servers generate starts for itself, kept by a `ServerKeeper` (the same one as
    `regen serve --restart-dead`). A context manager: on exit every server is stopped by its
    pid."""

    def __init__(self, spec: ServeSpec, policy: RestartPolicy | None = None) -> None:
        self.spec = spec
        # FLEET.json in the run's folder, so the next run can clean up after a kill -9
        self.keeper = ServerKeeper(spec, spec.log_dir / "FLEET.json", tied=True, policy=policy)

    @property
    def urls(self) -> list[str]:
        return self.keeper.urls

    def __enter__(self) -> EmbeddedFleet:
        self.keeper.stop_leftover()  # a server left by a killed earlier run
        self.keeper.start()
        return self

    async def watch(
        self, fleet: Fleet, servers: list[Server], on_event: Callable[[str], None]
    ) -> None:
        """Run until cancelled. An exit is seen within a fraction of a second; the server is
        taken out at once (its requests move on), restarted in place, and put back when it
        answers. One that keeps dying is retired, which stops the run when none is left."""
        by_process = dict(zip(self.keeper.processes, servers, strict=True))

        def react(change: Change) -> None:
            server = by_process[change.process]
            if change.kind is ChangeKind.EXITED:
                fleet.take_out(server, change.text, abort_in_flight=True)
            elif change.kind is ChangeKind.RESTARTED:
                on_event(change.text)
            elif change.kind is ChangeKind.READY:
                fleet.bring_back(server, "restarted and answers")
            else:
                fleet.retire(server, _gone_for_good(change))

        await self.keeper.watch(react)

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.keeper.stop(forget=True)


def _gone_for_good(change: Change) -> FleetUnavailable:
    """What the run says when its server will not come back: the report and the fix."""
    if change.report is None:
        return FleetUnavailable(change.text, hint="see the server's log")
    return FleetUnavailable(f"{change.text}\n{change.report.describe()}", hint=change.report.fix)
