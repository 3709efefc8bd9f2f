"""One `regen generate` on fresh fake engines, measured at the servers: its steady rate (the
engines' decoded-token counters over its first STEADY_S after the first token) and its whole
rate (from the first request to the last answer), with the levels it ran at."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from engine_fleets import Engine
from fleet_processes import fleet, get_json, stop
from generate_child import generate_cmd, levels_of
from regen.format.layout import OutputLayout

STEADY_S = 25.0  # seconds after the first token over which the steady rate is measured


def generated(urls: list[str]) -> float:
    """Decoded tokens so far, from the engines' counters (an engine without /metrics: the
    tokens of the answers it served)."""
    total = 0.0
    for url in urls:
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=5) as r:  # only 127.0.0.1
                text = r.read().decode()
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
            total += get_json(url + "/stats")["tokens_served"]
            continue
        for line in text.splitlines():
            if line.startswith(("vllm:generation_tokens_total", "sglang:generation_tokens")):
                total += float(line.rsplit(" ", 1)[1])
    return total


def one_run(
    specs: list[Engine],
    prompts: Path,
    work: Path,
    flags: list[str],
    limit: float,
    src: str | None = None,
):
    """One `regen generate` (the regen at `src`, else this one) on fresh servers, for at most
    `limit` seconds. Its rates:
    `steady`, the output tokens/s over the first STEADY_S after its first token (the ramp
    counts, the tail does not); `whole`, over the whole run, from the first request to the
    last answer (the wall time a user waits), or, cut at `limit`, the steady rate over the
    time it ran."""
    out = work / f"out-{time.monotonic_ns()}"
    with fleet(specs) as urls:
        cmd = generate_cmd(prompts, out, urls, *flags)
        env = os.environ | ({"PYTHONPATH": src} if src else {})
        with open(work / "regen.log", "ab") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
        t0, first, steady = time.monotonic(), None, None
        while proc.poll() is None and time.monotonic() - t0 < limit:
            time.sleep(0.2)
            now, decoded = time.monotonic(), generated(urls)
            if first is None and decoded > 0:
                first = now
            elif first is not None and steady is None and now - first >= STEADY_S:
                steady = decoded / (now - first)
        finished = proc.poll() == 0
        decoded, ended = generated(urls), time.time()
        stats = [get_json(u + "/stats") for u in urls]
        levels, answered = levels_of(out), _answered(out)
        stop(proc)
    began = min(s["first_request_at"] for s in stats if s["first_request_at"])
    if finished:
        seconds = max(s["last_served_at"] for s in stats if s["last_served_at"]) - began
        whole = sum(s["tokens_served"] for s in stats) / seconds
    else:
        seconds = ended - began
        whole = decoded / seconds
    subprocess.run(["rm", "-rf", str(out)], check=True)
    return {
        "steady": steady or whole,
        "whole": whole,
        "seconds": seconds,
        "finished": finished,
        "levels": levels,
        "answered": answered,
    }


def _answered(out: Path) -> tuple[int, int]:
    """Lines in completions/ and errors/, and the distinct prompts among them."""
    layout = OutputLayout.at(out)
    keys = [r["id"] for kind in ("completions", "errors") for r in layout.iter_records(kind)]
    return len(keys), len(set(keys))
