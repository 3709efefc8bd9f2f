"""Records/s through read → normalise → dedup (and the bounded blend), plus peak RSS.

    .venv/bin/python bench/bench_prepare.py            # 200K and 1M rows
    .venv/bin/python bench/bench_prepare.py --rows 1000000 --baseline 4164f0b --repeat 3

Each size runs in a fresh child process so its peak RSS is its own, pinned to one core.
Rows are ShareGPT records, 5% exact duplicates; the blend samples 50K, so memory should not
follow the size. `--baseline REF` also runs the `src/` of that git commit (extracted with
`git archive`) on the same input, alternating with today's code, so both figures come from
one run on one machine load; `--repeat` keeps each side's best run.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

SAMPLE = 50_000


def write_input(path: Path, rows: int) -> None:
    with open(path, "wb") as fh:
        for i in range(rows):
            k = i if i % 20 else i // 2  # every 20th row repeats an earlier prompt
            turns = [
                {"from": "system", "value": "You are a helpful assistant."},
                {"from": "human", "value": f"Question {k}: explain topic {k % 977} in detail."},
                {"from": "gpt", "value": f"An answer about topic {k % 977}."},
            ]
            fh.write(orjson.dumps({"id": i, "conversations": turns, "source": "synthetic"}) + b"\n")


def child(path: Path, rows: int) -> None:
    from regen.prepare import prepare
    from regen.prepare.recipe import parse_recipe

    recipe = parse_recipe(
        {"total": SAMPLE, "seed": 1, "sources": [{"path": str(path), "weight": 1}]}
    )
    start, cpu = time.perf_counter(), time.process_time()
    report = prepare(recipe, path.with_name("out.jsonl"))
    # CPU seconds, not wall: on a shared machine the wall clock measures the neighbours
    elapsed, wall = time.process_time() - cpu, time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = report.data["sources"][0]
    print(
        f"rows {rows:>9,}  {rows / elapsed:>9,.0f} records/CPU-s  {elapsed:6.1f} CPU-s "
        f"({wall:5.1f} s wall)  "
        f"peak RSS {peak_mb:6.0f} MB  dedup {s['deduplicated']:,}  selected {s['selected']:,}"
    )


def extract(ref: str, into: Path) -> Path:
    """The `src/` tree of git commit `ref`, for the side-by-side baseline."""
    repo = Path(__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", ref, "src"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def run_child(src: Path, path: Path, rows: int, label: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, __file__, "--child", str(path), "--rows", str(rows)]
    if hasattr(os, "sched_setaffinity"):  # one core: the figure is per core
        cmd = ["taskset", "-c", str(min(os.sched_getaffinity(0))), *cmd]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    print(f"{label:<10} {out.strip()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, action="append")
    parser.add_argument("--child", type=Path)
    parser.add_argument("--baseline", help="a git ref whose src/ runs beside today's")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rows[0])
        return
    today = Path(__file__).resolve().parent.parent / "src"
    with tempfile.TemporaryDirectory() as tmp:
        sides = [("today", today)]
        if args.baseline:
            sides.insert(0, (f"{args.baseline[:10]}", extract(args.baseline, Path(tmp))))
        for rows in args.rows or [200_000, 1_000_000]:
            path = Path(tmp) / f"in-{rows}.jsonl"
            write_input(path, rows)
            for _ in range(args.repeat):
                for label, src in sides:
                    run_child(src, path, rows, label)


if __name__ == "__main__":
    main()
