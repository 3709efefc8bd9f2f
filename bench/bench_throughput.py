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
from pathlib import Path
from typing import Any

from engine_fleets import FLEETS, Engine, write_prompts
from throughput_run import STEADY_S, one_run
from workspace import BENCH_DIR


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
