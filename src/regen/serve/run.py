"""`regen serve` as a library call: start the fleet, write FLEET.json, and either return
(the servers keep running on their own) or stay in the foreground and restart dead servers."""

from __future__ import annotations

import shlex
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from regen.errors import ConfigError
from regen.serve import cpus
from regen.serve.control import is_our_process, is_our_supervisor
from regen.serve.fleetfile import FleetFile, FleetSupervisor, check_writable, utc_now
from regen.serve.keeper import ServerKeeper
from regen.serve.launch import ServeSpec
from regen.serve.supervisor import Change, ChangeKind, RestartPolicy


def serve(
    spec: ServeSpec,
    fleet_path: Path,
    restart_dead: bool,
    echo: Callable[[str], None] = print,
    policy: RestartPolicy | None = None,
) -> int:
    """Returns the exit code. With `restart_dead` it returns only when stopped by SIGINT/SIGTERM
    (servers stopped, 0) or when every server died for good (1)."""
    refuse_running_fleet(fleet_path)
    check_writable(fleet_path)
    # Under --restart-dead the servers belong to this process and die with it.
    # ... and FLEET.json names this process, which `regen serve --stop` must end first.
    supervisor = FleetSupervisor.this_process() if restart_dead else None
    keeper = ServerKeeper(
        spec, fleet_path, tied=restart_dead, policy=policy, supervised_by=supervisor
    )
    launches = keeper.plan()
    for launch in launches:
        env = " ".join(f"{k}={v}" for k, v in launch.env.items())
        echo(f"{launch.name}: {env + ' ' if env else ''}{shlex.join(launch.command)}")
    if spec.engine == "vllm" and spec.device == "cpu" and cpus.seeds_can_crash(spec.extra):
        echo(
            "warning: vLLM's CPU build with --enable-chunked-prefill dies on requests that "
            "carry a seed (CPU Generator does not use offset): run generate without --seed, "
            "or drop that flag (regen turns chunked prefill off on CPU)"
        )
    echo(f"waiting for {len(launches)} server(s) to answer a first completion ...")
    keeper.start(launches)
    echo(f"{len(launches)} server(s) answer; wrote {fleet_path}")
    echo(f"use them with: regen generate --fleet {fleet_path} ...")
    if not restart_dead:
        echo(f"stop them with: regen serve --stop {fleet_path}")
        return 0
    return _supervise(keeper, echo)


def refuse_running_fleet(fleet_path: Path) -> None:
    """Writing over the FLEET.json of servers that still run would orphan them."""
    if not fleet_path.exists():
        return
    fleet = FleetFile.read(fleet_path)
    running = [s.name for s in fleet.servers if is_our_process(s)]
    supervisor = fleet.supervisor
    if supervisor is not None and is_our_supervisor(supervisor):  # it would restart them
        running.append(f"its supervisor, pid {supervisor.pid}")
    if running:
        raise ConfigError(
            f"{fleet_path} lists servers that still run ({', '.join(running)})",
            hint=f"stop them first with `regen serve --stop {fleet_path}`, or write another "
            "--fleet file",
        )


def _supervise(keeper: ServerKeeper, echo: Callable[[str], None]) -> int:
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in _STOP_SIGNALS}
    echo("supervising (Ctrl-C stops the servers) ...")

    def report(change: Change) -> None:
        echo(change.text)
        if change.kind is ChangeKind.DEAD and change.report is not None:
            echo(f"  fix: {change.report.fix}")

    try:
        keeper.supervise(stop, report)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        keeper.stop(forget=False)
        if stop.is_set():  # stopped on purpose: `regen serve --status` says so
            keeper.supervised_by = None
            keeper.write_record(stopped_at=utc_now())
        echo(f"stopped {len(keeper.processes)} server(s)")
    return 1 if keeper.all_dead and not stop.is_set() else 0


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
