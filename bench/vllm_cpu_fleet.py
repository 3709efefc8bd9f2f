"""A real vLLM CPU fleet for a benchmark, as a user runs one: `regen serve --engine vllm
--model embedded --device cpu` (the CPU build in .venv-vllm), its engines' /metrics, and
`regen serve --stop` at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from fleet_processes import stop
from workspace import ROOT

VLLM_PYTHON = Path(os.environ.get("REGEN_VLLM_PYTHON", ROOT / ".venv-vllm/bin/python"))


def serve_cmd(fleet: Path, replicas: int, python: Path, timeout: float, *more: str) -> list[str]:
    """`regen serve` of the embedded model on vLLM's CPU build (`python`), a 1 GiB KV cache
    and a 2,048-token context, its FLEET.json at `fleet`; `more`: its further arguments."""
    return [
        sys.executable,
        "-m",
        "regen",
        "serve",
        "--engine",
        "vllm",
        "--model",
        "embedded",
        "--device",
        "cpu",
        "--replicas",
        str(replicas),
        "--python",
        str(python),
        "--kv-cache-gib",
        "1",
        "--context",
        "2048",
        "--fleet",
        str(fleet),
        "--startup-timeout",
        str(int(timeout)),
        *more,
    ]


def serve(
    folder: Path, replicas: int = 2, eager: bool = False
) -> tuple[subprocess.Popen, list[str]]:
    """`regen serve` in the foreground, until it says its servers answer."""
    fleet = folder / "FLEET.json"
    engine_args = ["--", "--enforce-eager"] if eager else []
    cmd = serve_cmd(fleet, replicas, VLLM_PYTHON, 1200, *engine_args)
    log = folder / "serve.out"
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 1300
    while "server(s) answer; wrote" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_serve(proc, fleet)
            raise SystemExit(f"regen serve did not start; its output: {log}")
        time.sleep(2)
    urls = [s["url"] for s in json.loads(fleet.read_text())["servers"]]
    return proc, urls


def stop_serve(proc: subprocess.Popen, fleet: Path) -> None:
    """`regen serve` has exited once its servers answer (they outlive it, as a user's do):
    `regen serve --stop` stops them, by the pids FLEET.json names."""
    stop(proc)
    if fleet.exists():
        subprocess.run(
            [sys.executable, "-m", "regen", "serve", "--stop", str(fleet)], check=False, timeout=300
        )


def metric(urls: list[str], name: str) -> float:
    """A counter or gauge of vLLM's /metrics, summed over the servers and label sets."""
    total = 0.0
    for url in urls:
        with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:  # only 127.0.0.1
            for line in resp.read().decode().splitlines():
                if line.startswith((name + "{", name + " ")):
                    total += float(line.rsplit(" ", 1)[1])
    return total


def wait_idle(urls: list[str], limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while metric(urls, "vllm:num_requests_running") + metric(urls, "vllm:num_requests_waiting"):
        if time.monotonic() > deadline:
            raise SystemExit("the fleet did not go idle after an abandoned run")
        time.sleep(1)
