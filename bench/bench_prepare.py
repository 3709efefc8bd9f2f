"""Records/s through read → normalise → dedup (and the bounded blend), plus peak RSS.

    .venv/bin/python bench/bench_prepare.py            # 200K and 1M rows
    .venv/bin/python bench/bench_prepare.py --rows 1000000

Each size runs in a fresh child process so its peak RSS is its own. Rows are ShareGPT
records, 5% exact duplicates; the blend samples 50K, so memory should not follow the size.
"""

from __future__ import annotations

import argparse
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
    start = time.perf_counter()
    report = prepare(recipe, path.with_name("out.jsonl"))
    elapsed = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = report.data["sources"][0]
    print(
        f"rows {rows:>9,}  {rows / elapsed:>9,.0f} records/s  {elapsed:6.1f} s  "
        f"peak RSS {peak_mb:6.0f} MB  dedup {s['deduplicated']:,}  selected {s['selected']:,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, action="append")
    parser.add_argument("--child", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rows[0])
        return
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows or [200_000, 1_000_000]:
            path = Path(tmp) / f"in-{rows}.jsonl"
            write_input(path, rows)
            cmd = [sys.executable, __file__, "--child", str(path), "--rows", str(rows)]
            subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
