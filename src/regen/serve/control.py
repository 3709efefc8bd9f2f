"""`regen serve --status` and `--stop`: look at or stop the servers a FLEET.json lists.

A pid in an old file may since belong to another program, so a process is only signalled when
its command line is exactly the one regen started (read from /proc).

`--stop` ends the supervisor first (`regen serve --restart-dead`, when the file names one):
while it lives, a server killed under it is restarted on its port. Asked with SIGTERM, it
stops its own servers, the current ones whatever restarts changed their pids; SIGKILL after a
bounded wait takes its servers with it (they die with their parent). Then the servers the file
lists now are stopped by pid, and the file is marked stopped, which `--status` reports.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from regen.serve.auth import key_from_env
from regen.serve.fleetfile import FleetFile, FleetServer, FleetSupervisor, read_cmdline, utc_now
from regen.serve.process import answers_chat, end_group, signal_group


@dataclass(frozen=True)
class ServerState:
    name: str
    url: str
    pid: int | None
    running: bool  # the process regen started is still alive
    answers: bool  # it completed a one-token chat


def is_our_process(server: FleetServer) -> bool:
    """True when the pid is alive and runs the command regen started. Only the arguments are
    compared: `python` may be a shim (pyenv, conda) that execs another interpreter path, and
    the arguments hold the server's own port, which no other process has."""
    if server.pid is None:
        return False
    try:
        raw = Path(f"/proc/{server.pid}/cmdline").read_bytes()
    except OSError:
        return False
    args = [arg.encode() for arg in server.command[1:]]
    running = raw.rstrip(b"\0").split(b"\0")
    return len(running) > len(args) and running[-len(args) :] == args


def fleet_status(fleet: FleetFile) -> list[ServerState]:
    return [
        ServerState(
            s.name,
            s.url,
            s.pid,
            is_our_process(s),
            answers_chat(s.url, fleet.served_model_name, 10.0, key_from_env(fleet.api_key_env)),
        )
        for s in fleet.servers
    ]


def is_our_supervisor(supervisor: FleetSupervisor | None) -> bool:
    """True when the pid runs the very command line recorded for the supervisor."""
    return supervisor is not None and read_cmdline(supervisor.pid) == supervisor.command


def stop_fleet(path: Path, grace: float = 15.0) -> list[str]:
    """Stop the supervisor (if any), then every server the file lists, and mark the file
    stopped. Returns one line per process saying what was done."""
    fleet = FleetFile.read(path)
    lines: list[str] = []
    if fleet.supervisor is not None and is_our_supervisor(fleet.supervisor):
        lines.append(stop_supervisor(fleet.supervisor, 3 * grace))
        fleet = FleetFile.read(path)  # a restart may have changed a pid since
    lines += stop_servers(fleet, grace)
    fleet.stopped_at = utc_now()
    fleet.write(path)
    return lines


def stop_supervisor(supervisor: FleetSupervisor, wait: float) -> str:
    """SIGTERM: it stops its servers and exits. SIGKILL if it has not within `wait` seconds
    (its servers, tied to it, die with it)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(supervisor.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and is_our_supervisor(supervisor):
        time.sleep(0.2)
    if is_our_supervisor(supervisor):
        with contextlib.suppress(ProcessLookupError):
            os.kill(supervisor.pid, signal.SIGKILL)
        return f"supervisor: killed (pid {supervisor.pid}, still running after {wait:.0f}s)"
    return f"supervisor: stopped (pid {supervisor.pid})"


def stop_servers(fleet: FleetFile, grace: float) -> list[str]:
    """SIGTERM every server regen started, SIGKILL what is left after `grace` seconds."""
    ours = [s for s in fleet.servers if is_our_process(s)]
    lines = [f"{s.name}: not running" for s in fleet.servers if s not in ours]
    for server in ours:
        signal_group(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(is_our_process(s) for s in ours):
        time.sleep(0.2)
    for server in ours:
        if is_our_process(server):
            signal_group(server.pid, signal.SIGKILL)
            lines.append(f"{server.name}: killed (pid {server.pid}, ignored SIGTERM)")
        else:
            lines.append(f"{server.name}: stopped (pid {server.pid})")
    for server in ours:  # the children its exit left (vLLM's engine core)
        end_group(server.pid, grace)
    return lines
