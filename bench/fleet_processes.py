"""The processes a benchmark starts, each stopped by its pid: fake OpenAI-compatible servers
(`python -m regen.testing.fake_server`) on 127.0.0.1, one process per server, their /stats,
and a SIGTERM that stops them as Ctrl-C does."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

MODEL = "fake-model"  # the model name every fake server of the benchmarks serves


def stop(proc: subprocess.Popen) -> None:
    """Terminate, then kill: every process a benchmark starts ends here."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # only ever 127.0.0.1
        return json.loads(resp.read())


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"fake server {url} exited with {proc.returncode}")
        try:
            get_json(url + "/v1/models", timeout=1.0)
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"fake server {url} not ready after {timeout}s")


@dataclass(frozen=True)
class ServerSpec:
    slots: int
    seconds_per_token: float
    tokens: int
    jitter: float = 0.0
    pad_bytes: int = 0

    def args(self, port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "regen.testing.fake_server",
            "--port",
            str(port),
            "--slots",
            str(self.slots),
            "--seconds-per-token",
            str(self.seconds_per_token),
            "--tokens",
            str(self.tokens),
            "--tokens-jitter",
            str(self.jitter),
            "--pad-bytes",
            str(self.pad_bytes),
            "--model",
            MODEL,
        ]


@contextmanager
def fleet(specs: Sequence[Any]) -> Iterator[list[str]]:
    """Start one fake server process per spec (anything with `args(port)`: a ServerSpec, or
    bench_throughput's Engine); yield their base URLs; stop them all."""
    procs: list[subprocess.Popen] = []
    try:
        urls = []
        for spec, port in zip(specs, free_ports(len(specs)), strict=True):
            procs.append(subprocess.Popen(spec.args(port), stdout=subprocess.DEVNULL))
            urls.append(f"http://127.0.0.1:{port}")
        for url, proc in zip(urls, procs, strict=True):
            wait_ready(url, proc)
        yield urls
    finally:
        for proc in procs:
            stop(proc)


def fleet_stats(urls: list[str]) -> dict[str, float]:
    """Served count, tokens and the fleet-side window, summed over servers."""
    stats = [get_json(url + "/stats?times=1") for url in urls]

    def marks(name: str) -> list[float]:
        return [s[name] for s in stats if s[name] is not None] or [float("nan")]

    return {
        "served": sum(s["served"] for s in stats),
        "requests": sum(s["requests"] for s in stats),
        "tokens": sum(s["tokens_served"] for s in stats),
        "first_request_at": min(marks("first_request_at")),
        "last_request_at": max(marks("last_request_at")),
        "last_served_at": max(marks("last_served_at")),
        "served_at": sorted(t for s in stats for t in s["served_at"]),
        # a baseline tree's fake server (bench_scale runs one) does not report request times
        "requested_at": sorted(t for s in stats for t in s.get("requested_at", ())),
        "per_server": [s["served"] for s in stats],
    }


def exit_on_sigterm() -> None:
    """A stopped bench stops what it started (its fleet, a run in flight, CPU hogs): on SIGTERM
    it exits as on Ctrl-C, so that the `finally` blocks and context managers that stop them
    run; Python's default would end it at once and leave them running."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
