"""Short hands for the `regen serve` tests: the CLI as a process, --stop on a fleet file,
what a stand-in engine recorded of its launch, a block of free ports, and the stand-ins'
Python."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson

from regen.serve.fleetfile import FleetFile
from regen.serve.launch import free_port

STANDINS = Path(__file__).parent / "standins"


def regen(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "regen", *args], capture_output=True, text=True, timeout=timeout
    )


def stop_fleet_file(fleet_path: Path) -> subprocess.CompletedProcess:
    """`regen serve --stop`, then every pid the file names is killed by the test itself, so
    that a bug in --stop fails the test without leaving servers behind."""
    done = regen("serve", "--stop", str(fleet_path))
    if fleet_path.exists():
        for server in FleetFile.read(fleet_path).servers:
            try:  # looser than --stop's own check, on purpose: a stand-in on this port
                cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"engine.py" in cmdline and f"\0{server.port}\0".encode() in cmdline:
                os.killpg(server.pid, signal.SIGKILL)
    return done


def recorded(tmp_path: Path, port: int) -> dict:
    return orjson.loads((tmp_path / "records" / f"{port}.json").read_bytes())


def free_port_block(count: int) -> int:
    """A base port with `count` free ports after it (best effort, on loopback)."""
    from regen.serve.launch import port_is_free

    for _ in range(50):
        base = free_port()
        if base + count < 65535 and all(port_is_free("127.0.0.1", base + k) for k in range(count)):
            return base
    raise RuntimeError("no block of free ports")


def standin_python() -> str:
    return os.environ["STANDIN_PYTHON"]
