"""Benchmark of live concurrency on engines it has never seen (issue 56): regen's defaults
against the best fixed level, draw by draw, over a family of engines drawn at random
(regen.testing.engine_family: knees of 16 to 1,024 in flight, a KV cache before, at or far
after the knee, cliffs from mild to thrashing, answers of 100 to 8,000 tokens, /metrics or
none, faults, a slow server, a busy client).

    PYTHONPATH=src:bench .venv/bin/python bench/bench_family.py --draws 30
    PYTHONPATH=src:bench .venv/bin/python bench/bench_family.py --seeds 7,12   # replay two
    PYTHONPATH=src:bench .venv/bin/python bench/bench_family.py --draws 200 --virtual
    PYTHONPATH=src:bench .venv/bin/python bench/bench_family.py --draws 100 --virtual --orders 4

Each draw runs `regen generate --stream` on fresh fake servers (one process each, on the
draw's scaled clock): regen's defaults, and the draw's best fixed levels (the `--keep` best
of `Draw.fixed_levels` as the virtual-time fleet ranks them, a few seconds of CPU). A busy
client's draw runs every one of its runs beside two CPU hogs. Every prompt must be answered
exactly once in every run. `--virtual` runs all of it in virtual time instead
(testing/sim_fleet.py: regen's own controller, no HTTP, no client CPU), every fixed level
of the bracket. A run is chaotic (a window that closes a little earlier moves every later
one: one draw's ratio moves by up to 0.1 between orders of its answers), so `--orders K`
judges each draw on the mean of K orders of its answers: order 0 against the whole
bracket, each further one against order 0's three best fixed levels (each run again in
that order). Rates are the fake's tokens per wall second; only ratios within a draw mean
anything. Results: a table on stdout, the distribution of defaults / best fixed (min, 10th
percentile, median), and `.bench/family.json` (or family-virtual.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from functools import partial
from pathlib import Path

from engine_fleets import Engine, write_prompts
from fleet_processes import exit_on_sigterm
from regen.testing.cpu_hog import cpu_hogs
from regen.testing.engine_family import Draw, draw
from regen.testing.family_run import run_draw
from throughput_run import one_run
from workspace import BENCH_DIR

HOGS = 2  # beside a busy client's runs
TOP_ORDERS = 3  # fixed levels (order 0's best) each further order of a draw runs


def engines(d: Draw) -> list[Engine]:
    """The draw's servers as fake server processes: vLLM's wording where they serve
    /metrics, the plain fake's where they serve none."""
    return [
        Engine("vllm" if c.metrics else "", asdict(c), d.tokens, d.jitter, d.faults)
        for c in d.curves
    ]


def ranked(d: Draw, keep: int) -> list[int]:
    """The `keep` best of the draw's fixed levels, in virtual time."""
    rates = {n: run_draw(d, fixed=n).rate for n in d.fixed_levels()}
    return sorted(rates, key=rates.__getitem__, reverse=True)[:keep]


def http_draw(d: Draw, keep: int, work: Path) -> dict:
    prompts = work / f"prompts-{d.prompts}.jsonl"
    if not prompts.exists():
        write_prompts(prompts, d.prompts)
    flags = ["--stream", "--stall-timeout", f"{d.stall_timeout:.1f}"]
    runs = {"defaults": flags} | {
        n: [*flags, "--fixed-concurrency", "--concurrency-per-server", str(n)]
        for n in ranked(d, keep)
    }
    rows = {}
    with cpu_hogs(HOGS if d.busy_client else 0):
        for label, run_flags in runs.items():
            row = one_run(engines(d), prompts, work, run_flags, limit=900)
            rows[str(label)] = {
                "rate": row["whole"],
                "seconds": row["seconds"],
                "exactly_once": row["answered"] == (d.prompts, d.prompts) and row["finished"],
                "levels": [n for n, _ in row["levels"]],
            }
    return rows


def virtual_draw(seed: int, orders: int = 1) -> dict:
    d = draw(seed)
    rows = {}
    for label, fixed in [("defaults", None)] + [(str(n), n) for n in d.fixed_levels()]:
        r = run_draw(d, fixed=fixed)
        once = r.answered == r.answers == d.prompts
        rows[label] = {
            "rate": r.rate,
            "seconds": r.seconds,
            "exactly_once": once,
            "levels": r.levels,
        }
    if orders > 1:
        more = [_order_ratio(d, order, _top(rows, TOP_ORDERS)) for order in range(1, orders)]
        rows["defaults"]["orders"] = [_ratio(rows)] + [ratio for ratio, _ in more]
        rows["defaults"]["exactly_once"] &= all(once for _, once in more)
    return rows


def _top(rows: dict, keep: int) -> list[int]:
    fixed = {k: r["rate"] for k, r in rows.items() if k != "defaults"}
    return [int(k) for k in sorted(fixed, key=fixed.__getitem__, reverse=True)[:keep]]


def _order_ratio(d: Draw, order: int, levels: list[int]) -> tuple[float, bool]:
    """The defaults against the best of `levels` (order 0's best fixed ones) in another
    order of the draw, and whether every prompt was answered once in each of those runs."""
    runs = [run_draw(d, fixed=n, order=order) for n in levels] + [run_draw(d, order=order)]
    once = all(r.answered == r.answers == d.prompts for r in runs)
    return runs[-1].rate / max(r.rate for r in runs[:-1]), once


def _ratio(rows: dict) -> float:
    return rows["defaults"]["rate"] / max(r["rate"] for k, r in rows.items() if k != "defaults")


def verdict(seed: int, rows: dict) -> dict:
    fixed = {k: r["rate"] for k, r in rows.items() if k != "defaults"}
    best = max(fixed, key=fixed.__getitem__)
    orders = rows["defaults"].get("orders", [_ratio(rows)])
    ratio = statistics.mean(orders)  # over the draw's orders (--orders)
    once = all(r["exactly_once"] for r in rows.values())
    print(
        f"{ratio:6.3f}  best fixed {best:>5}  defaults ended at {rows['defaults']['levels']}"
        f"  {rows['defaults']['seconds']:.0f} s{'' if once else '  NOT EXACTLY ONCE'}"
        + (f"  orders {min(orders):.3f}-{max(orders):.3f}" if len(orders) > 1 else "")
        + f"  | {draw(seed).label()}",
        flush=True,
    )
    return {"seed": seed, "ratio": ratio, "best": best, "exactly_once": once, "rows": rows}


def distribution(ratios: list[float]) -> dict[str, float]:
    ordered = sorted(ratios)
    # inclusive: the exclusive default extrapolates past the ends (a p10 under the min with
    # few draws)
    p10 = (
        statistics.quantiles(ordered, n=10, method="inclusive")[0]
        if len(ordered) > 1
        else ordered[0]
    )
    return {"min": ordered[0], "p10": p10, "median": statistics.median(ordered)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--first", type=int, default=0, help="the first draw's seed")
    parser.add_argument("--seeds", default=None, help="these draws instead, e.g. 7,12")
    parser.add_argument("--keep", type=int, default=2, help="fixed levels run per draw (HTTP)")
    parser.add_argument("--virtual", action="store_true", help="in virtual time, no HTTP")
    parser.add_argument("--jobs", type=int, default=1, help="processes (--virtual)")
    parser.add_argument(
        "--orders",
        type=int,
        default=1,
        help="each draw's ratio as the mean over this many orders of its answers (--virtual)",
    )
    args = parser.parse_args()
    if args.orders > 1 and not args.virtual:
        parser.error("--orders runs in virtual time only: add --virtual (or drop --orders)")
    exit_on_sigterm()
    seeds = (
        [int(s) for s in args.seeds.split(",")]
        if args.seeds
        else list(range(args.first, args.first + args.draws))
    )
    results = []
    if args.virtual:
        with ProcessPoolExecutor(args.jobs) as pool:
            runs = pool.map(partial(virtual_draw, orders=args.orders), seeds)
            for seed, rows in zip(seeds, runs, strict=True):
                results.append(verdict(seed, rows))
    else:
        work = BENCH_DIR / "family"
        work.mkdir(parents=True, exist_ok=True)
        for seed in seeds:
            results.append(verdict(seed, http_draw(draw(seed), args.keep, work)))
    spread = distribution([r["ratio"] for r in results])
    lost = [r["seed"] for r in results if not r["exactly_once"]]
    print(
        f"\n{len(results)} draws: defaults / best fixed  min {spread['min']:.3f}"
        f"  p10 {spread['p10']:.3f}  median {spread['median']:.3f};"
        f" exactly once in every run: {'yes' if not lost else f'NO (draws {lost})'}"
    )
    name = "family-virtual.json" if args.virtual else "family.json"
    BENCH_DIR.mkdir(exist_ok=True)
    (BENCH_DIR / name).write_text(json.dumps({"distribution": spread, "draws": results}, indent=1))


if __name__ == "__main__":
    main()
