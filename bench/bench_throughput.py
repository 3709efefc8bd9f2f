"""Benchmark of live concurrency: regen's defaults against the best fixed level.

    .venv/bin/python bench/bench_throughput.py            # full (~15 min on 2 cores)
    .venv/bin/python bench/bench_throughput.py --quick    # fewer prompts and levels
    .venv/bin/python bench/bench_throughput.py --curve    # only the engine's curve

Against fake engines (`python -m regen.testing.fake_server --engine ...`, fake_engine.py):
continuous batching on a scaled clock, decode time growing with the batch, a KV cache that
preempts past its size, a waiting queue past max_running. For each fleet, in one run:

1. `--fixed-concurrency --concurrency-per-server N` for N = 1, 2, 4, ... 1024;
2. regen's defaults (live concurrency, cap 1024);
3. (equal fleet) the defaults with a cap far above the knee (`--concurrency-per-server 8192`).

Each run starts fresh servers (empty caches, zeroed counters) and the same prompts. Output
tokens/s is measured at the servers: the tokens of the answers served over the time from the
first request to the last answer. A fixed level too slow to finish within its time limit is
measured instead by the engines' own decoded-token counters over the time it ran (its
steady rate, without the ramp and tail a whole run pays: in the fixed level's favour).
Rates are the fake's tokens per wall second; only their ratios mean anything.

Results: a table on stdout and `.bench/throughput.json`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench_generate import BENCH_DIR, free_ports, get_json, stop, wait_ready

MODEL = "fake-model"


@dataclass(frozen=True)
class Engine:
    dialect: str
    curve: dict[str, Any]
    tokens: int = 400
    jitter: float = 0.5

    def args(self, port: int) -> list[str]:
        return [
            sys.executable, "-m", "regen.testing.fake_server", "--port", str(port),
            "--engine", json.dumps(self.curve), "--dialect", self.dialect, "--model", MODEL,
            "--tokens", str(self.tokens), "--tokens-jitter", str(self.jitter),
        ]  # fmt: skip


# A GPU-like curve: the knee where the KV cache (60K tokens) holds ~110 requests of this mix.
BIG = Engine("vllm", {"kv_tokens": 60_000, "max_running": 256, "time_scale": 0.2})
# A smaller, slower server (another GPU kind or tensor-parallel size), SGLang's dialect.
SMALL = Engine(
    "sglang",
    {
        "kv_tokens": 24_000,
        "max_running": 48,
        "step_s": 0.03,
        "per_seq_s": 0.0003,
        "time_scale": 0.2,
    },
)
FLEETS = {"equal": [BIG, BIG], "mixed": [BIG, SMALL]}


@contextmanager
def engines(specs: list[Engine]):
    procs = []
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


def write_prompts(path: Path, count: int, words: int = 60) -> None:
    with open(path, "wb") as fh:
        for i in range(count):
            text = " ".join(f"w{i}x{j}" for j in range(words))
            line = {"id": f"p{i:06d}", "messages": [{"role": "user", "content": text}]}
            fh.write(orjson.dumps(line) + b"\n")


def generated(urls: list[str]) -> float:
    """Decoded tokens so far, from the engines' counters."""
    total = 0.0
    for url in urls:
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:  # only 127.0.0.1
            for line in r.read().decode().splitlines():
                if line.startswith(("vllm:generation_tokens_total", "sglang:generation_tokens")):
                    total += float(line.rsplit(" ", 1)[1])
    return total


def one_run(specs: list[Engine], prompts: Path, work: Path, flags: list[str], limit: float):
    out = work / f"out-{time.monotonic_ns()}"
    with engines(specs) as urls:
        cmd = [
            sys.executable, "-m", "regen", "generate", "--prompts", str(prompts),
            "--output-dir", str(out), "--display", "none", "--servers", *urls, *flags,
        ]  # fmt: skip
        with open(work / "regen.log", "ab") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
        t0 = time.monotonic()
        while proc.poll() is None and time.monotonic() - t0 < limit:
            time.sleep(0.2)
        finished = proc.poll() == 0
        decoded, ended = generated(urls), time.time()
        stats = [get_json(u + "/stats") for u in urls]
        levels = _levels(out)
        stop(proc)
    first = min(s["first_request_at"] for s in stats if s["first_request_at"])
    if finished:
        last = max(s["last_served_at"] for s in stats if s["last_served_at"])
        rate = sum(s["tokens_served"] for s in stats) / (last - first)
    else:
        rate = decoded / (ended - first)
    subprocess.run(["rm", "-rf", str(out)], check=True)
    return {"rate": rate, "finished": finished, "levels": levels}


def _levels(out: Path) -> list[Any]:
    try:
        snap = json.loads((out / "progress.json").read_text())
    except (OSError, ValueError):
        return []
    return [(s["concurrency"], s["concurrency_why"]) for s in snap.get("servers", [])]


def sweep(name: str, specs: list[Engine], prompts: Path, work: Path, levels: list[int]) -> dict:
    rows: dict[str, Any] = {}
    for level in levels:
        flags = ["--fixed-concurrency", "--concurrency-per-server", str(level)]
        rows[f"fixed {level}"] = one_run(specs, prompts, work, flags, limit=25)
        print(
            f"  {name} fixed {level:>5}: {rows[f'fixed {level}']['rate']:>8.0f} tok/s", flush=True
        )
    runs = {"defaults": []}
    if name == "equal":
        runs["defaults, cap 8192"] = ["--concurrency-per-server", "8192"]
    for label, flags in runs.items():
        rows[label] = one_run(specs, prompts, work, flags, limit=600)
        print(
            f"  {name} {label}: {rows[label]['rate']:.0f} tok/s {rows[label]['levels']}", flush=True
        )
    best = max((r["rate"], k) for k, r in rows.items() if k.startswith("fixed"))
    for label in runs:
        rows[label]["of_best"] = rows[label]["rate"] / best[0]
    return {"rows": rows, "best_fixed": best[1], "best_rate": best[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--prompts", type=int, default=None)
    args = parser.parse_args()
    count = args.prompts or (1500 if args.quick else 4000)
    levels = [1, 8, 64, 128, 256, 1024] if args.quick else [2**k for k in range(11)]
    BENCH_DIR.mkdir(exist_ok=True)
    work = BENCH_DIR / "throughput"
    work.mkdir(exist_ok=True)
    prompts = work / "prompts.jsonl"
    write_prompts(prompts, count)
    results = {"prompts": count, "levels": levels}
    for name, specs in FLEETS.items():
        print(f"{name} fleet ({len(specs)} servers), {count} prompts", flush=True)
        results[name] = sweep(name, specs, prompts, work, levels)
    print("\nfleet   run                 output tok/s   of best fixed")
    for name in FLEETS:
        r = results[name]
        print(f"{name:<7} best: {r['best_fixed']:<13} {r['best_rate']:>12.0f}")
        for label, row in r["rows"].items():
            if "of_best" in row:
                print(f"{name:<7} {label:<19} {row['rate']:>12.0f}   {row['of_best']:.3f}")
    (BENCH_DIR / "throughput.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
