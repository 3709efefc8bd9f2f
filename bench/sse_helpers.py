"""What bench_stream.py and bench_seeds.py share: the streaming fleet process, and the
`regen generate` command they time (streamed, with token ids, at a fixed concurrency)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from fleet_processes import free_ports, get_json, stop, wait_ready

SRC = str(Path(__file__).resolve().parent.parent / "src")


class SseFleet:
    """`python -m regen.testing.sse_fleet` on `servers` ports, as one process of its own."""

    def __init__(self, servers: int, **options: Any) -> None:
        self.ports = free_ports(servers)
        self.options = options
        self.urls = [f"http://127.0.0.1:{port}" for port in self.ports]
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> list[str]:
        cmd = [sys.executable, "-m", "regen.testing.sse_fleet", "--ports", *map(str, self.ports)]
        for name, value in self.options.items():
            cmd += [f"--{name.replace('_', '-')}", str(value)]
        env = {"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
        for url in self.urls:
            wait_ready(url, self.proc)
        return self.urls

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            stop(self.proc)

    def stats(self) -> list[dict[str, Any]]:
        return [get_json(url + "/stats", timeout=30) for url in self.urls]

    def total(self, name: str) -> int:
        return sum(s[name] for s in self.stats())

    def cpu_s(self) -> float:
        assert self.proc is not None
        times = psutil.Process(self.proc.pid).cpu_times()
        return times.user + times.system


def regen_cmd(src: str, prompts: Path, out: Path, urls: list[str], per_server: int) -> list[str]:
    """regen from `src` (this tree, or an older one for a before/after), streamed with ids."""
    return [
        "env",
        f"PYTHONPATH={src}",
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(prompts),
        "--output-dir",
        str(out),
        "--servers",
        *urls,
        "--stream",
        "--return-token-ids",
        "--max-output-tokens",
        "40000",
        "--fixed-concurrency",
        "--concurrency-per-server",
        str(per_server),
        "--display",
        "none",
    ]


def wait(until: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(0.5)


class PeakRss:
    """A process's peak RSS, sampled every 50 ms by a thread."""

    def __init__(self, proc: psutil.Process) -> None:
        self.proc, self.peak = proc, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(0.05):
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return  # it exited

    def stop(self) -> int:
        self._done.set()
        self._thread.join(timeout=5)
        return self.peak
