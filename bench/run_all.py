"""`make bench`: run every benchmark under bench/ (each `bench_*.py`, in name order), one after
the other, each as its own process so that one's memory never counts in another's figures.

    .venv/bin/python bench/run_all.py                 # every benchmark at full size
    .venv/bin/python bench/run_all.py generate plan   # only bench_generate.py and bench_plan.py

Each benchmark prints its table and writes its JSON under .bench/; the figures that stand are
copied by hand, with the command, into BENCHMARKS.md. Exits non-zero if any benchmark failed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).parent


def main(only: list[str]) -> int:
    every = {s.stem.removeprefix("bench_"): s for s in sorted(BENCH.glob("bench_*.py"))}
    unknown = sorted(set(only) - set(every))
    if unknown:
        print(f"no benchmark named {unknown}; have: {', '.join(every)}")
        return 2
    scripts = [script for name, script in every.items() if not only or name in only]
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(script)], check=False)
        print(f"=== {script.name}: exit {done.returncode} in {time.monotonic() - started:.0f} s")
        if done.returncode != 0:
            failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
