"""Benchmark of `regen generate`: fleet utilisation, client cost, memory and resume at 1M.

    .venv/bin/python bench/bench_generate.py            # full size (~3 min on 2 cores)
    .venv/bin/python bench/bench_generate.py --quick    # scaled down (~40 s; too small to
                                                        # compare with the targets)

Four parts, each against fake servers (`python -m regen.testing.fake_server`) running as
separate processes on 127.0.0.1, with `regen generate` run as a child process:

1. Utilisation: 8 capacity-limited servers (equal; then one at half speed). Achieved
   throughput is measured at the servers, identically for both clients: completions served
   / (last completion sent - first request received). Counting from the first *request*,
   not the first completion, charges the ramp-up and the tail to the client; counting from
   the first completion would overstate the rate by about one service time. Ideal throughput
   = sum over servers of slots / (mean tokens x seconds per token), with the mean token count
   of what was actually served (answer lengths vary +-50% by a hash of the prompt, so both
   clients get exactly the same jobs). The naive client beside it is a static round-robin:
   prompt i goes to server i % 8, each server with `slots` workers of its own.
2. Client cost: zero-latency servers with ~8 KB answers. CPU-seconds of the regen process
   come from the kernel's accounting of the reaped child (getrusage of children), so the
   fake servers' CPU on the same 2 cores is not counted in it.
3/4. Resume at 1M: a 1M-prompt input whose first 1M - N prompts are already finished in an
   output dir synthesized in regen's own shard format (sealed shards of 20,000 small
   ~330-byte records with `.keys` sidecars, and a manifest written by regen's own
   `check_and_record`). `regen generate` then generates the N new prompts; its RSS (with
   children) is sampled every 50 ms, and the time from process start to the first request
   the fake server receives is reported. A separate child then times the start-up phases
   (input fingerprint, ledger scan, streaming past the finished prompts) with regen's code.

With `--bucket`, parts 1 and 2 write to S3 instead (moto's server on loopback, started and
stopped here; shards uploaded every 5 s), to see whether uploading costs utilisation or
client throughput.

Results: a table on stdout and `.bench/generate.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fleet_processes import free_ports
from generate_client_cost import bench_client_cost
from generate_resume import bench_resume, measure_phases
from generate_sizes import QUICK, Sizes
from generate_utilisation import bench_utilisation, print_row
from workspace import BENCH_DIR, machine


@contextmanager
def moto_bucket(wanted: bool) -> Iterator[str | None]:
    """With --bucket: moto's S3 server on loopback (stopped by pid), a fresh bucket prefix,
    and the AWS_* variables that point regen at it; uploads every 5 s."""
    if not wanted:
        yield None
        return
    import boto3

    from regen.testing.moto_server import moto_server

    with moto_server(free_ports(1)[0]) as endpoint:
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": endpoint,
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_DEFAULT_REGION": "us-east-1",
            }
        )
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
        yield f"s3://bench/{int(time.time())}"


# -- report ------------------------------------------------------------------------------
def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for row in results.get("utilisation", []):
        if row["client"] == "regen":
            value = row["utilisation"]
            goal = 0.98 if row["fleet"] == "8 equal" else 0.975  # issue 22
            name = f"utilisation, {row['fleet']}"
            if "length_blind_ceiling" in row:
                name += f" (ceiling {row['length_blind_ceiling']:.3f})"
            rows.append(target(name, value, f">= {goal}", value >= goal))
    if cost := results.get("client_cost"):
        rate = cost["completions_per_s"]
        rows.append(target("completions/s, one process", rate, ">= 1500", rate >= 1500))
    if resume := results.get("resume"):
        n = f"{resume['prompts']:,}"
        rss, start = resume["peak_rss_mb"], resume["first_request_s"]
        rows.append(target(f"peak RSS (MB) at {n} prompts", rss, "<= 300", rss <= 300))
        rows.append(target(f"resume start (s) at {n}", start, "<= 10", start <= 10))
    return rows


def target(name: str, value: float, goal: str, met: bool) -> dict[str, Any]:
    return {"name": name, "value": value, "target": goal, "met": met}


def print_report(results: dict[str, Any]) -> None:
    print("\n== utilisation (fleet-side: served / (last completion - first request)) ==")
    for row in results.get("utilisation", []):
        print_row(row)
    if cost := results.get("client_cost"):
        print("\n== client cost (zero-latency servers, 8 KB answers) ==")
        for key, value in cost.items():
            print(f"  {key:<26} {value}")
    if resume := results.get("resume"):
        print("\n== resume over an output dir with finished prompts ==")
        for key, value in resume.items():
            print(f"  {key:<26} {value}")
    print("\n== targets ==")
    for row in results["targets"]:
        verdict = "met" if row["met"] else "MISSED"
        print(f"  {row['name']:<52} {row['value']:>10} {row['target']:>8}  {verdict}")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="every part, scaled down (~40 s)")
    ap.add_argument("--parts", default="util,cost,resume", help="comma-separated subset")
    ap.add_argument("--util-prompts", type=int, help="prompts per utilisation measurement")
    ap.add_argument("--cost-prompts", type=int, help="completions for the client-cost part")
    ap.add_argument("--resume-prompts", type=int, help="input size for the resume part")
    ap.add_argument("--timeout", type=float, default=300, help="limit per regen run, seconds")
    ap.add_argument("--keep", action="store_true", help="keep the synthesized resume files")
    ap.add_argument(
        "--record-bytes", type=int, help="size of each synthesized finished completion (resume)"
    )
    ap.add_argument(
        "--bucket",
        action="store_true",
        help="util and cost write to S3 (moto on loopback, started here) instead of a dir",
    )
    ap.add_argument(
        "--no-naive", action="store_true", help="util: measure regen only, not the naive client"
    )
    ap.add_argument("--phases", nargs=2, metavar=("PROMPTS", "OUT"), help=argparse.SUPPRESS)
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.phases:
        print(json.dumps(measure_phases(Path(args.phases[0]), Path(args.phases[1]))))
        return
    sz = QUICK if args.quick else Sizes()
    overrides = {
        "util_prompts": args.util_prompts,
        "cost_prompts": args.cost_prompts,
        "resume_prompts": args.resume_prompts,
        "record_bytes": args.record_bytes,
    }
    sz = Sizes(**{**asdict(sz), **{k: v for k, v in overrides.items() if v}})
    work = BENCH_DIR / "generate-work"
    work.mkdir(parents=True, exist_ok=True)
    parts = set(args.parts.split(","))
    results: dict[str, Any] = {"command": " ".join(sys.argv), "machine": machine()}
    results["sizes"] = asdict(sz)
    started = time.monotonic()
    with moto_bucket(args.bucket) as bucket:
        results["output"] = bucket or "local directory"
        if "util" in parts:
            print("== utilisation ==", flush=True)
            results["utilisation"] = bench_utilisation(
                sz, work, args.timeout, bucket, naive=not args.no_naive
            )
        if "cost" in parts:
            results["client_cost"] = bench_client_cost(sz, work, args.timeout, bucket)
    if "resume" in parts:
        results["resume"] = bench_resume(sz, work, args.timeout, args.keep)
    results["targets"] = targets(results)
    results["total_s"] = round(time.monotonic() - started, 1)
    print_report(results)
    (BENCH_DIR / "generate.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {BENCH_DIR / 'generate.json'} ({results['total_s']} s)")


if __name__ == "__main__":
    main()
