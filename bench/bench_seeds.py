"""Benchmark at the scale of a seeds run: can one regen process keep up with a B200 fleet?

    .venv/bin/python bench/bench_seeds.py            # a 60-s window (~2.5 min on 2 cores)
    .venv/bin/python bench/bench_seeds.py --quick    # a 20-s window
    .venv/bin/python bench/bench_seeds.py --src /tmp/old/src   # an older tree's regen

8 streaming engines (`python -m regen.testing.sse_fleet`, one separate process: pre-encoded
events, so their CPU is not the client's) of 1,024 slots each, every answer decoding one token
an event at 4 tokens/s (0.25 s a token), so the fleet's ideal rate is 8 x 1,024 x 4 = 32,768
tokens/s once 8,192 answers are in flight (`--slots N`: N a server, each answer faster so that
the fleet's rate stays 32,768). Thinking-length answers: log-normal, median 2,048
tokens, sigma 0.9, cut at 32,768 (the length is a hash of the prompt). Reasoning then content,
token ids in every chunk (vLLM's shape). An engine holds an answer back while its client has
not read what was sent (a full socket), so the tokens sent are the tokens regen took.

`regen generate --stream --return-token-ids --fixed-concurrency --concurrency-per-server 1024`
runs on 40,000 prompts. Once every slot is busy and a warm-up has passed, over the window:
the fraction of the ideal rate the engines sent (tokens sent / (32,768 x window)), regen's CPU
(psutil, user + system) per token and in cores, the engines' own CPU, late engine steps (the
engines' process could not keep its clock: their shortfall, not regen's), and regen's peak
RSS over the whole run. Live concurrency is not used: at 4 tokens/s a request lasts minutes,
so its windows would too; the fixed level puts the full 8,192 streams on the client at once.

Results: a table on stdout and `.bench/seeds.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from fleet_processes import stop
from generate_child import write_prompts
from sse_helpers import SRC, PeakRss, SseFleet, regen_cmd, wait
from workspace import BENCH_DIR

SERVERS, SLOTS, FLEET_RATE = 8, 1024, 32_768  # slots a server; tokens/s with every slot busy
PROMPTS = 40_000
WARM_S = 10.0


def cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def failed_requests(out: Path) -> int | None:
    """Requests regen saw fail (and retried), from its progress file."""
    try:
        progress = json.loads((out / "progress.json").read_text())
    except (OSError, ValueError):
        return None
    return sum(server["failed"] for server in progress["servers"])


def client_cmd(src: str, prompts: Path, out: Path, urls: list[str], slots: int) -> list[str]:
    """regen from `src`, or with src "bare" the bare aiohttp+orjson client of bench_stream."""
    if src != "bare":
        return regen_cmd(src, prompts, out, urls, slots)
    bare = str(Path(__file__).parent / "bench_stream.py")
    return [sys.executable, bare, "--bare-streams", str(slots), "--bare", str(PROMPTS), *urls]


def measure(src: str, window: float, work: Path, slots: int) -> dict[str, Any]:
    prompts, out = work / "prompts.jsonl", work / "out"
    write_prompts(prompts, PROMPTS)
    shutil.rmtree(out, ignore_errors=True)
    seconds_per_token = SERVERS * slots / FLEET_RATE  # 0.25 s at 1,024 slots
    fleet = SseFleet(
        SERVERS,
        slots=slots,
        seconds_per_token=seconds_per_token,
        tokens=2048,
        sigma=0.9,
        max_tokens=32_768,
    )
    with fleet as urls, open(work / "regen.log", "wb") as log:
        started = time.monotonic()
        cmd = client_cmd(src, prompts, out, urls, slots)
        child = subprocess.Popen(cmd, stdout=log, stderr=log)
        proc = psutil.Process(child.pid)
        peak = PeakRss(proc)
        try:
            wait(lambda: fleet.total("running") == SERVERS * slots, 300, "every slot busy")
            full_after = time.monotonic() - started
            time.sleep(WARM_S)
            first, t0, c0, f0 = fleet.stats(), time.monotonic(), cpu_s(proc), fleet.cpu_s()
            time.sleep(window)
            last, t1, c1, f1 = fleet.stats(), time.monotonic(), cpu_s(proc), fleet.cpu_s()
            if child.poll() is not None:
                raise RuntimeError(f"regen exited with {child.returncode} during the window")
        finally:
            stop(child)
            peak_rss = peak.stop()

    def delta(name: str) -> int:
        return sum(b[name] - a[name] for a, b in zip(first, last, strict=True))

    sent, span, client = delta("tokens_sent"), t1 - t0, c1 - c0
    return {
        "window_s": round(span, 1),
        "slots_full_after_s": round(full_after, 1),
        "tokens_sent": sent,
        "tokens_per_s": round(sent / span),
        "slots_a_server": slots,
        "ideal_tokens_per_s": FLEET_RATE,
        "fraction_of_ideal": round(sent / (FLEET_RATE * span), 4),
        "answers_finished": delta("served"),
        "client_cpu_s": round(client, 2),
        "client_us_per_token": round(1e6 * client / sent, 2),
        "client_cores": round(client / span, 3),
        "client_cores_at_30k": round(client / sent * 30_000, 3),
        "fleet_cores": round((f1 - f0) / span, 3),
        "late_steps": delta("late_steps"),
        "peak_rss_mb": round(peak_rss / 2**20, 1),
        "requests_failed": failed_requests(out),  # a server taken out fails its requests
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a 20-s window instead of 60 s")
    ap.add_argument(
        "--src",
        default=SRC,
        help="regen from this src/ (an older tree); 'bare': the bare aiohttp+orjson client instead",
    )
    ap.add_argument("--slots", type=int, default=SLOTS, help="per server (the rate stays)")
    args = ap.parse_args()
    work = BENCH_DIR / "seeds-work"
    work.mkdir(parents=True, exist_ok=True)
    src = args.src if args.src == "bare" else str(Path(args.src).resolve())
    row = measure(src, 20.0 if args.quick else 60.0, work, args.slots)
    results = {
        "command": " ".join(sys.argv),
        "src": args.src,
        "cpus": os.cpu_count(),
        "load_avg_at_end": os.getloadavg(),
        **row,
    }
    targets = [
        ("fraction_of_ideal", ">=", 0.98),
        ("client_cores_at_30k", "<=", 0.3),
        ("peak_rss_mb", "<=", 1024),
    ]
    for name, op, goal in targets:
        met = row[name] >= goal if op == ">=" else row[name] <= goal
        print(f"{name:24} {row[name]:>10} target {op} {goal}  {'met' if met else 'NOT met'}")
    print(json.dumps(results))
    (BENCH_DIR / "seeds.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
