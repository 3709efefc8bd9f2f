"""One `regen generate` on the real vLLM CPU fleet, measured by the engines' own counters
(`vllm:generation_tokens_total`): over a span from its first token, or to its end; and
abandoned as a user's Ctrl-C twice would."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import orjson

from fleet_processes import stop
from generate_child import generate_cmd, levels_of
from vllm_cpu_fleet import metric


def write_prompts(path: Path, tag: str, count: int, system: str = "") -> None:
    with open(path, "wb") as fh:
        for i in range(count):
            words = " ".join(f"{tag}{i}w{j}" for j in range(40))
            messages = [{"role": "user", "content": f"Summarise in one line: {words}"}]
            if system:
                messages.insert(0, {"role": "system", "content": system})
            fh.write(orjson.dumps({"id": f"{tag}-{i:05d}", "messages": messages}) + b"\n")


def generate(
    prompts: Path, out: Path, urls: list[str], *flags: str, src: str | None = None
) -> subprocess.Popen:
    """`regen generate` (the regen whose sources are at `src`, else this one)."""
    cmd = generate_cmd(prompts, out, urls, "--temperature", "0.7", *flags)
    env = os.environ | ({"PYTHONPATH": src} if src else {})
    with open(out.parent / f"{out.name}.log", "wb") as log:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)


def measured(urls: list[str], proc: subprocess.Popen, seconds: float, out: Path):
    """Output tokens/s over `seconds` from the first token the run got generated, over the
    second half of them alone (where live concurrency has settled), and each change of the
    servers' levels on the way (seconds from the first token, each server's level and why)."""
    base = metric(urls, "vllm:generation_tokens_total")
    deadline = time.monotonic() + 600
    while metric(urls, "vllm:generation_tokens_total") == base:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"regen generate ended before a token ({proc.returncode})")
        time.sleep(0.2)
    started, first = time.monotonic(), metric(urls, "vllm:generation_tokens_total")
    middle, half, trace = None, 0.0, []
    while (now := time.monotonic()) < started + seconds:
        if middle is None and now >= started + seconds / 2:
            middle, half = now, metric(urls, "vllm:generation_tokens_total")
        levels = levels_of(out)  # (level, why): a run's log alone does not say why it moved
        if not trace or trace[-1][1] != levels:
            trace.append((round(now - started), levels))
        time.sleep(1)
    ended, last = time.monotonic(), metric(urls, "vllm:generation_tokens_total")
    assert middle is not None
    return (last - first) / (ended - started), (last - half) / (ended - middle), trace


def abandon(proc: subprocess.Popen) -> None:
    """Two SIGTERMs: the second leaves at once (its requests abandoned, not drained)."""
    for _ in range(2):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
    stop(proc)


def to_the_end(urls: list[str], proc: subprocess.Popen, out: Path) -> dict:
    """Output tokens from the run's first to its exit, over that time; its levels on the way
    (each server's level and why)."""
    base = metric(urls, "vllm:generation_tokens_total")
    deadline = time.monotonic() + 1800
    while metric(urls, "vllm:generation_tokens_total") == base:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"regen generate ended before a token ({proc.returncode})")
        time.sleep(0.2)
    started, trace = time.monotonic(), []
    while proc.poll() is None and time.monotonic() < deadline:
        levels = levels_of(out)
        if levels and (not trace or trace[-1][1] != levels):
            trace.append((round(time.monotonic() - started), levels))
        time.sleep(0.5)
    if proc.returncode != 0:
        raise SystemExit(f"regen generate failed ({proc.returncode}): {out}.log")
    seconds = time.monotonic() - started
    tokens = metric(urls, "vllm:generation_tokens_total") - base
    return {"rate": tokens / seconds, "seconds": seconds, "trace": trace}
