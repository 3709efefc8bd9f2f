"""Live concurrency and cache-affine dispatch on a real vLLM CPU fleet (issue 27, item 5).

    .venv/bin/python bench/bench_throughput_vllm.py                  # both parts (~25 min)
    .venv/bin/python bench/bench_throughput_vllm.py --parts prefix   # one of sweep, prefix
    .venv/bin/python bench/bench_throughput_vllm.py --parts whole --replicas 1 --eager \
        --levels 32,128 --before OLD/src       # issue 34's case: whole runs, old and new

Starts `regen serve --engine vllm --model embedded --device cpu --replicas 2` as a user
would (the CPU build in .venv-vllm, the cores split between the replicas, 1 GiB of KV cache
each), and stops it at the end. Then:

sweep:  `regen generate --fixed-concurrency --concurrency-per-server N` for N = 1, 2, 4 ...
        1024 (--seconds each), and regen's defaults (--defaults-seconds: its climb counts in
        full, over a longer run), each on prompts of its own (no run is helped by the one
        before's prefix cache). Each is measured the same way: output tokens generated (the
        engines' `vllm:generation_tokens_total`) from the moment the first one was, over its
        time, and over the second half of it. The run is then stopped (two SIGTERMs: its
        requests are abandoned, and vLLM aborts them) and the fleet waits idle for the next.
whole:  whole runs to their end (--prompts prompts, --max-tokens each, of their own), for
        each fixed level, regen's defaults and, with --before SRC, the defaults of the regen
        at SRC: output tokens over the time from the run's first token to its exit, and the
        levels the defaults went through.
prefix: the prefix-cache hit rate, `vllm:prefix_cache_hits` / `vllm:prefix_cache_queries`
        (tokens) summed over the servers, of whole runs with 4 samples per prompt and with a
        shared ~1,500-token system prompt (a tool catalogue), `--dispatch least-loaded` and
        `affine` on the two servers, and on one server alone (the most the cache gives).

Results: tables on stdout and `.bench/throughput_vllm.json`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from fleet_processes import exit_on_sigterm, stop
from generate_child import levels_of
from vllm_cpu_fleet import metric, serve, stop_serve, wait_idle
from vllm_runs import abandon, generate, measured, to_the_end, write_prompts
from workspace import BENCH_DIR

LEVELS = [2**k for k in range(11)]


def sweep(urls: list[str], work: Path, seconds: float, levels: list[int], longer: float) -> dict:
    """Each fixed level for `seconds`; the defaults for `longer` (their climb is a one-off
    cost, which a run of hours pays once: here it counts in full, over `longer`)."""
    rows = {}
    runs = {
        f"fixed {n}": ["--fixed-concurrency", "--concurrency-per-server", str(n)] for n in levels
    }
    runs["defaults"] = []
    for label, flags in runs.items():
        tag = label.replace(" ", "")
        prompts, out = work / f"{tag}.jsonl", work / f"out-{tag}"
        write_prompts(prompts, tag, 3000)
        proc = generate(prompts, out, urls, "--max-output-tokens", "32", *flags)
        try:
            span = longer if label == "defaults" else seconds
            rate, settled, trace = measured(urls, proc, span, out)
            rows[label] = {"rate": rate, "second_half": settled, "levels": levels_of(out)}
            if label == "defaults":
                rows[label]["trace"] = trace
                print(f"  defaults' levels (s: per server): {trace}", flush=True)
        finally:
            abandon(proc)
        wait_idle(urls)
        print(
            f"  {label:<12} {rate:7.1f} tok/s (second half {settled:7.1f})  "
            f"{rows[label]['levels']}",
            flush=True,
        )
    best = max((r["rate"], k) for k, r in rows.items() if k.startswith("fixed"))
    rows["defaults"]["of_best"] = rows["defaults"]["rate"] / best[0]
    rows["defaults"]["second_half_of_best"] = rows["defaults"]["second_half"] / best[0]
    return {"rows": rows, "best_fixed": best[1], "best_rate": best[0]}


def whole_runs(urls: list[str], work: Path, args: argparse.Namespace) -> dict:
    """Each fixed level, the defaults and the defaults before, to the end of their prompts."""
    runs: dict[str, tuple[list[str], str | None]] = {
        f"fixed {n}": (["--fixed-concurrency", "--concurrency-per-server", str(n)], None)
        for n in (int(n) for n in args.levels.split(","))
    }
    runs["defaults"] = ([], None)
    if args.before:
        runs["defaults, before"] = ([], args.before)
    rows = {}
    for label, (flags, src) in runs.items():
        tag = "w" + label.replace(" ", "").replace(",", "")
        prompts, out = work / f"{tag}.jsonl", work / f"out-{tag}"
        write_prompts(prompts, tag, args.prompts)
        proc = generate(
            prompts, out, urls, "--max-output-tokens", str(args.max_tokens), *flags, src=src
        )
        try:
            rows[label] = to_the_end(urls, proc, out)
        finally:
            abandon(proc)
        wait_idle(urls)
        print(
            f"  {label:<18} {rows[label]['rate']:7.1f} tok/s over {rows[label]['seconds']:.0f}"
            f" s  levels {rows[label]['trace']}",
            flush=True,
        )
    best = max((r["rate"], k) for k, r in rows.items() if k.startswith("fixed"))
    for row in rows.values():
        row["of_best"] = row["rate"] / best[0]
    return {"rows": rows, "best_fixed": best[1], "best_rate": best[0]}


def tool_catalogue(tokens: int = 1500) -> str:
    """A system prompt of about `tokens` tokens (SmolLM2's tokenizer) listing tools."""
    lines, k = ["You can call these tools. Answer in one line."], 0
    while len(" ".join(lines).split()) < tokens * 0.44:  # ~2.3 tokens per word here
        lines.append(f"tool_{k}(city: str, day: int) -> str: the weather report number {k}.")
        k += 1
    return "\n".join(lines)


def hit_rate(urls: list[str], work: Path, tag: str, flags: list[str], system: str) -> float:
    prompts, out = work / f"{tag}.jsonl", work / f"out-{tag}"
    write_prompts(prompts, tag, 24 if not system else 64, system)
    hits, queries = (metric(urls, f"vllm:prefix_cache_{n}_total") for n in ("hits", "queries"))
    proc = generate(prompts, out, urls, "--max-output-tokens", "8", *flags)
    try:
        if proc.wait(timeout=1800) != 0:
            raise SystemExit(f"regen generate failed: {out.parent / (out.name + '.log')}")
    finally:
        stop(proc)
    hits = metric(urls, "vllm:prefix_cache_hits_total") - hits
    return hits / (metric(urls, "vllm:prefix_cache_queries_total") - queries)


def prefix(urls: list[str], work: Path) -> dict:
    catalogue = tool_catalogue()
    workloads = {
        "4 samples per prompt": (["--samples-per-prompt", "4"], ""),
        "shared 1,500-token system prompt": ([], catalogue),
    }
    fleets = {
        "least-loaded, 2 servers": (urls, ["--dispatch", "least-loaded"]),
        "affine, 2 servers": (urls, ["--dispatch", "affine"]),
        "one server alone": (urls[:1], []),
    }
    results: dict = {}
    for workload, (flags, system) in workloads.items():
        for name, (servers, dispatch) in fleets.items():
            tag = f"px{len(results)}"
            rate = hit_rate(servers, work, tag, [*flags, *dispatch], system)
            results[f"{workload} | {name}"] = rate
            print(f"  {workload:<34} {name:<24} hit rate {rate:.3f}", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="sweep,prefix")
    parser.add_argument("--seconds", type=float, default=30.0, help="per fixed level")
    parser.add_argument("--defaults-seconds", type=float, default=120.0)
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)))
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--eager", action="store_true", help="serve with --enforce-eager")
    parser.add_argument("--prompts", type=int, default=480, help="whole: prompts a run")
    parser.add_argument("--max-tokens", type=int, default=64, help="whole: tokens an answer")
    parser.add_argument(
        "--before",
        default=None,
        metavar="SRC",
        help="whole: also the defaults of the regen whose sources are at SRC",
    )
    args = parser.parse_args()
    exit_on_sigterm()
    parts = args.parts.split(",")
    BENCH_DIR.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="regen-bench-vllm-", dir=BENCH_DIR))
    proc, urls = serve(work, args.replicas, args.eager)
    results: dict = {}
    try:
        if "whole" in parts:
            print(
                f"whole runs: {args.replicas} vLLM CPU server(s), {args.prompts} prompts x "
                f"{args.max_tokens} tokens",
                flush=True,
            )
            results["whole"] = r = whole_runs(urls, work, args)
            print(
                f"best fixed: {r['best_fixed']} at {r['best_rate']:.1f} tok/s; "
                + "; ".join(f"{k} {v['of_best']:.3f}" for k, v in r["rows"].items())
            )
        if "sweep" in parts:
            print(f"sweep: 2 vLLM CPU servers, {args.seconds:.0f} s a level", flush=True)
            levels = [int(n) for n in args.levels.split(",")]
            results["sweep"] = sweep(urls, work, args.seconds, levels, args.defaults_seconds)
            r = results["sweep"]
            print(
                f"best fixed: {r['best_fixed']} at {r['best_rate']:.1f} tok/s; defaults "
                f"{r['rows']['defaults']['rate']:.1f} = {r['rows']['defaults']['of_best']:.3f}"
            )
        if "prefix" in parts:
            print("prefix-cache hit rate", flush=True)
            results["prefix"] = prefix(urls, work)
    finally:
        stop_serve(proc, work / "FLEET.json")
    (BENCH_DIR / "throughput_vllm.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
