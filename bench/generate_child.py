"""`regen generate` as a child process of a benchmark: the prompts it reads, its command line,
its run measured from outside (wall time, CPU from the kernel, peak RSS with children), and
the concurrency levels its progress.json reports."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
import psutil

from fleet_processes import stop


def prompt_line(i: int) -> bytes:
    pid = f"p{i:07d}"
    return orjson.dumps({"id": pid, "messages": [{"role": "user", "content": f"question {pid}"}]})


def write_prompts(path: Path, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for start in range(0, count, 50_000):  # in blocks: one write per 50k lines
            end = min(count, start + 50_000)
            fh.write(b"\n".join(prompt_line(i) for i in range(start, end)) + b"\n")


@dataclass
class ProcRun:
    exit_code: int
    started_at: float  # time.time() just before the child was started
    wall_s: float
    cpu_s: float  # user + system of the child and its children, from the kernel
    peak_rss_mb: float  # sampled every 50 ms, child plus its children


def generate_cmd(prompts: Path, out: Path | str, urls: list[str], *flags: str) -> list[str]:
    """`regen generate` of `prompts` into `out` on `urls`, no display, with `flags`."""
    return [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(prompts),
        "--output-dir",
        str(out),
        "--display",
        "none",
        "--servers",
        *urls,
        *flags,
    ]


def regen_cmd(prompts: Path, out: Path | str, urls: list[str], concurrency: int) -> list[str]:
    uploads = ["--upload-interval", "5"] if "://" in str(out) else []  # uploads during the run
    return generate_cmd(prompts, out, urls, "--concurrency-per-server", str(concurrency), *uploads)


def tree_rss(proc: psutil.Process) -> int:
    try:
        procs = [proc, *proc.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs)
    except psutil.Error:
        return 0  # it exited between the two calls


def run_regen(cmd: list[str], timeout: float, log: Path) -> ProcRun:
    """Run regen to the end, sampling its memory; CPU comes from the reaped child's rusage.

    No other child of this script is reaped while it runs (the fake servers live on), so the
    RUSAGE_CHILDREN difference is this child's alone. Its stderr goes to a file: a pipe
    nobody reads would block it once full."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started_at, t0 = time.time(), time.monotonic()
    with open(log, "wb") as err_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_file)
    peak = 0
    try:
        watched = psutil.Process(proc.pid)
        while proc.poll() is None:
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"regen did not finish in {timeout:.0f}s")
            peak = max(peak, tree_rss(watched))
            time.sleep(0.05)
        wall = time.monotonic() - t0
    finally:
        stop(proc)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"regen exited with {proc.returncode}: {tail}")
    return ProcRun(proc.returncode, started_at, wall, cpu, peak / 2**20)


def levels_of(out: Path) -> list:
    """Each server's (level, why) in the run's last progress.json ([] before the first)."""
    try:
        snap = json.loads((out / "progress.json").read_text())
    except (OSError, ValueError):  # not written yet, or being replaced
        return []
    return [(s["concurrency"], s["concurrency_why"]) for s in snap.get("servers", [])]
