"""Benchmark of live concurrency under faults: regen's defaults against fixed levels, with
the same faults, on an engine regen has not met (issue 46).

    PYTHONPATH=src:bench .venv/bin/python bench/bench_faults.py                 # every case
    PYTHONPATH=src:bench .venv/bin/python bench/bench_faults.py --cases after4 \
        --prompts 6000 --levels 64,256                # the issue's own case
    PYTHONPATH=src:bench .venv/bin/python bench/bench_faults.py --cases after4 \
        --prompts 6000 --levels 256 --hogs 2          # beside two busy processes

The fleet is bench_throughput's `unmet` one: four servers of `fake_engine.UNMET` (decode
time growing with the batch, a KV cache that recomputes past about 290 requests of this
mix, no /metrics, no running limit), answers streamed (`--stream`). Each case injects its
faults at every server, cycled per request (`--faults` of the fake server):

- `before1`, `before4`, `before10`: 1, 4 or 10 in 100 streams end with an in-stream 503
  before any token (HTTP 200, an error event, [DONE]: a refusal, as SGLang's full queue);
- `after1`, `after4`, `after10`: the same after half the answer (a failed request);
- `burst429`: 20 requests in a row answered 429 (Retry-After 0.2 s), every 400;
- `slow`: no faults, but one server of four decodes at half the speed;
- `clean`: no faults.

With `--hogs N`, every run has N processes spinning on the client machine beside it (a
busy CI, or a client doing other work): the levels must still climb on what each pays.

Each run is `regen generate` on fresh servers, from the first request to the last answer,
with the whole answers' tokens (a stream that failed counts nothing); every prompt must be
answered exactly once (its `answered` column: lines and distinct prompts). Rates are the
fake's tokens per wall second; only their ratios within a case mean anything.
Results: a table on stdout and `.bench/faults.json`.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from engine_fleets import UNMET, Engine, write_prompts
from regen.testing.cpu_hog import cpu_hogs
from throughput_run import one_run
from workspace import BENCH_DIR


def every(fault: str, per_100: int) -> tuple[str, ...]:
    return ("ok",) * (100 // per_100 - 1) + (fault,)


CASES: dict[str, tuple[str, ...]] = {
    "clean": (),
    "before1": every("stream_refused", 1),
    "before4": every("stream_refused", 4),
    "before10": every("stream_refused", 10),
    "after1": every("stream_error", 1),
    "after4": every("stream_error", 4),
    "after10": every("stream_error", 10),
    "burst429": ("ok",) * 380 + ("429",) * 20,
    "slow": (),
}
SLOW = replace(UNMET, curve={**UNMET.curve, "step_s": 0.04, "per_seq_s": 0.0008})


def fleet_for(case: str) -> list[Engine]:
    faulty = replace(UNMET, faults=CASES[case])
    return [SLOW, faulty, faulty, faulty] if case == "slow" else [faulty] * 4


def run_case(case: str, prompts: Path, count: int, work: Path, levels: list[int]) -> dict:
    specs = fleet_for(case)
    rows: dict[str, dict] = {}
    runs = {"defaults": []} | {
        f"fixed {n}": ["--fixed-concurrency", "--concurrency-per-server", str(n)] for n in levels
    }
    for label, flags in runs.items():
        row = one_run(specs, prompts, work, ["--stream", *flags], limit=1200)
        row["exactly_once"] = row["answered"] == (count, count)
        rows[label] = row
        print(
            f"  {case:<9} {label:<10} {row['whole']:>8.0f} tok/s  {row['seconds']:>6.0f} s"
            f"  answered {row['answered']}  {row['levels']}",
            flush=True,
        )
    best = max(rows[k]["whole"] for k in rows if k != "defaults")
    rows["defaults"]["of_best"] = rows["defaults"]["whole"] / best
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help="of " + ", ".join(CASES))
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--levels", default="128,256", help="fixed levels a server")
    parser.add_argument("--hogs", type=int, default=0, help="busy processes beside each run")
    args = parser.parse_args()
    levels = [int(n) for n in args.levels.split(",")]
    work = BENCH_DIR / "faults"
    work.mkdir(parents=True, exist_ok=True)
    prompts = work / "prompts.jsonl"
    write_prompts(prompts, args.prompts)
    results: dict[str, dict] = {"prompts": args.prompts, "levels": levels, "hogs": args.hogs}
    with cpu_hogs(args.hogs):
        for case in args.cases.split(","):
            results[case] = run_case(case, prompts, args.prompts, work, levels)
    print("\ncase       defaults tok/s  best fixed tok/s (level)  of best  exactly once")
    for case in args.cases.split(","):
        rows = results[case]
        fixed = max((r["whole"], k) for k, r in rows.items() if k != "defaults")
        once = all(r["exactly_once"] for r in rows.values())
        print(
            f"{case:<10} {rows['defaults']['whole']:>14.0f}  {fixed[0]:>16.0f} ({fixed[1]})"
            f"  {rows['defaults']['of_best']:>7.3f}  {once}"
        )
    (BENCH_DIR / "faults.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
