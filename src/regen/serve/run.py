"""`regen serve` as a library call: start the fleet, write FLEET.json, and either return
(the servers keep running on their own) or stay in the foreground and restart dead servers."""

from __future__ import annotations

import shlex
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from regen.errors import ConfigError
from regen.serve.control import is_our_process
from regen.serve.fleetfile import FleetFile
from regen.serve.launch import ServeSpec, fleet_file, plan_servers, start_all
from regen.serve.process import ServerProcess
from regen.serve.supervisor import RestartPolicy, Supervisor


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
    launches = plan_servers(spec)
    for launch in launches:
        env = " ".join(f"{k}={v}" for k, v in launch.env.items())
        echo(f"{launch.name}: {env + ' ' if env else ''}{shlex.join(launch.command)}")
    echo(f"waiting for {len(launches)} server(s) to answer a first completion ...")
    # Under --restart-dead the servers belong to this process and die with it.
    processes = start_all(launches, spec.startup_timeout, tied=restart_dead)
    fleet = fleet_file(spec, processes)
    fleet.write(fleet_path)
    echo(f"{len(processes)} server(s) answer; wrote {fleet_path}")
    echo(f"use them with: regen generate --fleet {fleet_path} ...")
    if not restart_dead:
        echo(f"stop them with: regen serve --stop {fleet_path}")
        return 0
    policy = policy or RestartPolicy(startup_timeout=spec.startup_timeout)
    return _supervise(processes, spec, fleet_path, policy, echo)


def refuse_running_fleet(fleet_path: Path) -> None:
    """Writing over the FLEET.json of servers that still run would orphan them."""
    if not fleet_path.exists():
        return
    running = [s.name for s in FleetFile.read(fleet_path).servers if is_our_process(s)]
    if running:
        raise ConfigError(
            f"{fleet_path} lists servers that still run ({', '.join(running)})",
            hint=f"stop them first with `regen serve --stop {fleet_path}`, or write another "
            "--fleet file",
        )


def _supervise(
    processes: list[ServerProcess],
    spec: ServeSpec,
    fleet_path: Path,
    policy: RestartPolicy,
    echo: Callable[[str], None],
) -> int:
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in _STOP_SIGNALS}
    supervisor = Supervisor(processes, policy)
    echo("supervising (Ctrl-C stops the servers) ...")
    try:
        while not stop.is_set() and not supervisor.all_dead:
            for change in supervisor.step():
                echo(change.text)
                if change.kind == "dead" and change.report is not None:
                    echo(f"  fix: {change.report.fix}")
                if change.kind == "restarted":
                    fleet_file(spec, processes).write(fleet_path)  # the new pid
            stop.wait(0.5)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for process in processes:
            process.stop()
        echo(f"stopped {len(processes)} server(s)")
    return 1 if supervisor.all_dead and not stop.is_set() else 0


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
