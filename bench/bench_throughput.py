"""Benchmark of live concurrency: regen's defaults against the best fixed level.

    .venv/bin/python bench/bench_throughput.py            # full (~25 min on 2 cores)
    .venv/bin/python bench/bench_throughput.py --quick    # fewer prompts and levels
    .venv/bin/python bench/bench_throughput.py --fleets unmet --prompts 2000 \
        --levels 128,256,512 --before OLD/src   # also the defaults of another checkout

Against fake engines (`python -m regen.testing.fake_server --engine ...`, fake_engine.py):
continuous batching on a scaled clock, decode time growing with the batch, a KV cache that
preempts past its size, a waiting queue past max_running. The `unmet` fleet is four servers
of fake_engine.UNMET (issue 34): no /metrics, no running limit, output falling past its KV
cache; it is measured by the answers served (/stats), the others by the engines' counters.
For each fleet, in one run:

1. regen's defaults (live concurrency, cap 1024), and on the equal fleet the defaults with a
   cap far above the knee (`--concurrency-per-server 8192`); with `--before SRC`, also the
   defaults of the regen whose sources are at SRC (before and after, side by side);
2. `--fixed-concurrency --concurrency-per-server N` for N = 1, 2, 4, ... 1024: the engine's
   throughput curve against concurrency.

Each run starts fresh servers (empty caches, zeroed counters) and the same prompts, and is
measured at the servers two ways: `steady`, the output tokens/s (the engines' decoded-token
counters) over the first 25 s after the first token, its ramp included and its tail not;
`whole`, the tokens of the answers served over the time from the first request to the last
answer, the wall time a user waits. A fixed level whose steady rate is below 80% of the
defaults' is cut after those 25 s (its `whole` is then its steady rate over the time it ran:
in its favour); the others, and every level of the unmet fleet, run to the end. Rates are
the fake's tokens per wall second; only their ratios mean anything.

Results: a table on stdout and `.bench/throughput.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from bench_generate import BENCH_DIR, fleet, get_json, stop
from regen.format.layout import OutputLayout
from regen.testing import fake_engine

MODEL = "fake-model"
STEADY_S = 25.0  # seconds after the first token over which the steady rate is measured


@dataclass(frozen=True)
class Engine:
    dialect: str
    curve: dict[str, Any]
    tokens: int = 400
    jitter: float = 0.5
    faults: tuple[str, ...] = ()  # cycled per request (fake_behaviour.Behaviour.faults)

    @property
    def metrics(self) -> bool:
        return self.curve.get("metrics", True)

    def args(self, port: int) -> list[str]:
        dialect = ["--dialect", self.dialect] if self.dialect else []
        return [
            sys.executable,
            "-m",
            "regen.testing.fake_server",
            "--port",
            str(port),
            "--engine",
            json.dumps(self.curve),
            *dialect,
            "--model",
            MODEL,
            "--tokens",
            str(self.tokens),
            "--tokens-jitter",
            str(self.jitter),
            *(["--faults", json.dumps(list(self.faults))] if self.faults else []),
        ]


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
UNMET = Engine("", asdict(fake_engine.UNMET))  # the plain fake's wording, no /metrics
FLEETS = {"equal": [BIG, BIG], "mixed": [BIG, SMALL], "unmet": [UNMET] * 4}


def write_prompts(path: Path, count: int, words: int = 60) -> None:
    with open(path, "wb") as fh:
        for i in range(count):
            text = " ".join(f"w{i}x{j}" for j in range(words))
            line = {"id": f"p{i:06d}", "messages": [{"role": "user", "content": text}]}
            fh.write(orjson.dumps(line) + b"\n")


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
        cmd = [
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
        levels, answered = _levels(out), _answered(out)
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


def _levels(out: Path) -> list[Any]:
    try:
        snap = json.loads((out / "progress.json").read_text())
    except (OSError, ValueError):
        return []
    return [(s["concurrency"], s["concurrency_why"]) for s in snap.get("servers", [])]


def sweep(
    name: str,
    specs: list[Engine],
    prompts: Path,
    work: Path,
    levels: list[int],
    before: str | None = None,
) -> dict:
    """regen's defaults first (their wall time bounds the rest; with `before`, those of the
    regen at that source folder too), then each fixed level: cut after STEADY_S unless it is
    a contender (its steady rate within 20% of the defaults') or its fleet has no engine
    counters; those run to the end like the defaults (up to three times their time)."""
    runs: dict[str, tuple[list[str], str | None]] = {"defaults": ([], None)}
    if before:
        runs["defaults, before"] = ([], before)
    if name == "equal":
        runs["defaults, cap 8192"] = (["--concurrency-per-server", "8192"], None)
    rows: dict[str, Any] = {}
    for label, (flags, src) in runs.items():
        rows[label] = one_run(specs, prompts, work, flags, limit=900, src=src)
        _show(name, label, rows[label])
    took = rows["defaults"]["seconds"]
    best_steady = rows["defaults"]["steady"]
    counted = all(spec.metrics for spec in specs)  # by the engines' counters
    for level in levels:
        flags = ["--fixed-concurrency", "--concurrency-per-server", str(level)]
        # A fleet measured by its answers has no steady rate in its first seconds (the first
        # answers come late): every level runs to the end.
        row = one_run(specs, prompts, work, flags, limit=STEADY_S + 2) if counted else None
        if row is None or row["steady"] >= 0.8 * best_steady:
            row = one_run(specs, prompts, work, flags, limit=3 * took)
        rows[f"fixed {level}"] = row
        _show(name, f"fixed {level}", row)
    fixed = {k: r for k, r in rows.items() if k.startswith("fixed")}
    best = {m: max((r[m], k) for k, r in fixed.items()) for m in ("steady", "whole")}
    for label in runs:
        for m in ("steady", "whole"):
            rows[label][f"{m}_of_best"] = rows[label][m] / best[m][0]
    return {"rows": rows, "best": best}


def _show(fleet_name: str, label: str, row: dict) -> None:
    done = "" if row["finished"] else " (cut)"
    print(
        f"  {fleet_name} {label:<18} steady {row['steady']:>8.0f}  whole {row['whole']:>8.0f}"
        f" tok/s{done} {row['levels']}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--prompts", type=int, default=None)
    parser.add_argument("--fleets", default=",".join(FLEETS), help="of " + ", ".join(FLEETS))
    parser.add_argument("--levels", default=None, help="fixed levels, e.g. 128,256,512")
    parser.add_argument(
        "--before",
        default=None,
        metavar="SRC",
        help="also run the defaults of the regen whose sources are at SRC",
    )
    args = parser.parse_args()
    count = args.prompts or (1500 if args.quick else 4000)
    levels = [1, 8, 64, 128, 256, 1024] if args.quick else [2**k for k in range(11)]
    if args.levels:
        levels = [int(n) for n in args.levels.split(",")]
    fleets = {name: FLEETS[name] for name in args.fleets.split(",")}
    BENCH_DIR.mkdir(exist_ok=True)
    work = BENCH_DIR / "throughput"
    work.mkdir(exist_ok=True)
    prompts = work / "prompts.jsonl"
    write_prompts(prompts, count)
    results = {"prompts": count, "levels": levels}
    for name, specs in fleets.items():
        print(f"{name} fleet ({len(specs)} servers), {count} prompts", flush=True)
        results[name] = sweep(name, specs, prompts, work, levels, args.before)
    print("\nfleet   run                  steady tok/s  of best   whole tok/s  of best")
    for name in fleets:
        r = results[name]
        steady, whole = r["best"]["steady"], r["best"]["whole"]
        print(
            f"{name:<7} best fixed ({steady[1]}; {whole[1]})  {steady[0]:>9.0f}"
            f"            {whole[0]:>9.0f}"
        )
        for label, row in r["rows"].items():
            if "steady_of_best" in row:
                print(
                    f"{name:<7} {label:<20} {row['steady']:>9.0f}    {row['steady_of_best']:.3f}"
                    f"   {row['whole']:>9.0f}    {row['whole_of_best']:.3f}"
                )
    (BENCH_DIR / "throughput.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
