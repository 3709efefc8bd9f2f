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
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

from bench_generate import BENCH_DIR, ROOT, stop

VLLM_PYTHON = Path(os.environ.get("REGEN_VLLM_PYTHON", ROOT / ".venv-vllm/bin/python"))
LEVELS = [2**k for k in range(11)]


def serve(
    folder: Path, replicas: int = 2, eager: bool = False
) -> tuple[subprocess.Popen, list[str]]:
    """`regen serve` in the foreground, until it says its servers answer."""
    fleet = folder / "FLEET.json"
    cmd = [
        sys.executable,
        "-m",
        "regen",
        "serve",
        "--engine",
        "vllm",
        "--model",
        "embedded",
        "--device",
        "cpu",
        "--replicas",
        str(replicas),
        "--python",
        str(VLLM_PYTHON),
        "--kv-cache-gib",
        "1",
        "--context",
        "2048",
        "--fleet",
        str(fleet),
        "--startup-timeout",
        "1200",
        *(["--", "--enforce-eager"] if eager else []),
    ]
    log = folder / "serve.out"
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 1300
    while "server(s) answer; wrote" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_serve(proc, fleet)
            raise SystemExit(f"regen serve did not start; its output: {log}")
        time.sleep(2)
    urls = [s["url"] for s in json.loads(fleet.read_text())["servers"]]
    return proc, urls


def stop_serve(proc: subprocess.Popen, fleet: Path) -> None:
    """`regen serve` has exited once its servers answer (they outlive it, as a user's do):
    `regen serve --stop` stops them, by the pids FLEET.json names."""
    stop(proc)
    if fleet.exists():
        subprocess.run(
            [sys.executable, "-m", "regen", "serve", "--stop", str(fleet)], check=False, timeout=300
        )


def metric(urls: list[str], name: str) -> float:
    """A counter or gauge of vLLM's /metrics, summed over the servers and label sets."""
    total = 0.0
    for url in urls:
        with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:  # only 127.0.0.1
            for line in resp.read().decode().splitlines():
                if line.startswith((name + "{", name + " ")):
                    total += float(line.rsplit(" ", 1)[1])
    return total


def wait_idle(urls: list[str], limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while metric(urls, "vllm:num_requests_running") + metric(urls, "vllm:num_requests_waiting"):
        if time.monotonic() > deadline:
            raise SystemExit("the fleet did not go idle after an abandoned run")
        time.sleep(1)


def write_prompts(path: Path, tag: str, count: int, system: str = "") -> None:
    with open(path, "wb") as fh:
        for i in range(count):
            words = " ".join(f"{tag}{i}w{j}" for j in range(40))
            messages = [{"role": "user", "content": f"Summarise in one line: {words}"}]
            if system:
                messages.insert(0, {"role": "system", "content": system})
            fh.write(orjson.dumps({"id": f"{tag}-{i:05d}", "messages": messages}) + b"\n")


def generate(
    prompts: Path, out: Path, urls: list[str], *flags: str, src: str | None = None
) -> subprocess.Popen:
    """`regen generate` (the regen whose sources are at `src`, else this one)."""
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
        "--temperature",
        "0.7",
        *flags,
    ]
    env = os.environ | ({"PYTHONPATH": src} if src else {})
    with open(out.parent / f"{out.name}.log", "wb") as log:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)


def measured(urls: list[str], proc: subprocess.Popen, seconds: float, out: Path):
    """Output tokens/s over `seconds` from the first token the run got generated, over the
    second half of them alone (where live concurrency has settled), and each change of the
    servers' levels on the way (seconds from the first token, levels)."""
    base = metric(urls, "vllm:generation_tokens_total")
    deadline = time.monotonic() + 600
    while metric(urls, "vllm:generation_tokens_total") == base:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"regen generate ended before a token ({proc.returncode})")
        time.sleep(0.2)
    started, first = time.monotonic(), metric(urls, "vllm:generation_tokens_total")
    middle, half, trace = None, 0.0, []
    while (now := time.monotonic()) < started + seconds:
        if middle is None and now >= started + seconds / 2:
            middle, half = now, metric(urls, "vllm:generation_tokens_total")
        levels = [n for n, _ in levels_of(out)]
        if not trace or trace[-1][1] != levels:
            trace.append((round(now - started), levels))
        time.sleep(1)
    ended, last = time.monotonic(), metric(urls, "vllm:generation_tokens_total")
    assert middle is not None
    return (last - first) / (ended - started), (last - half) / (ended - middle), trace


def abandon(proc: subprocess.Popen) -> None:
    """Two SIGTERMs: the second leaves at once (its requests abandoned, not drained)."""
    for _ in range(2):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
    stop(proc)


def levels_of(out: Path) -> list:
    try:
        snap = json.loads((out / "progress.json").read_text())
    except (OSError, ValueError):  # not written yet, or being replaced
        return []
    return [(s["concurrency"], s["concurrency_why"]) for s in snap["servers"]]


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


def to_the_end(urls: list[str], proc: subprocess.Popen, out: Path) -> dict:
    """Output tokens from the run's first to its exit, over that time; its levels on the way."""
    base = metric(urls, "vllm:generation_tokens_total")
    deadline = time.monotonic() + 1800
    while metric(urls, "vllm:generation_tokens_total") == base:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"regen generate ended before a token ({proc.returncode})")
        time.sleep(0.2)
    started, trace = time.monotonic(), []
    while proc.poll() is None and time.monotonic() < deadline:
        levels = [n for n, _ in levels_of(out)]
        if levels and (not trace or trace[-1][1] != levels):
            trace.append((round(time.monotonic() - started), levels))
        time.sleep(0.5)
    if proc.returncode != 0:
        raise SystemExit(f"regen generate failed ({proc.returncode}): {out}.log")
    seconds = time.monotonic() - started
    tokens = metric(urls, "vllm:generation_tokens_total") - base
    return {"rate": tokens / seconds, "seconds": seconds, "trace": trace}


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
    # A stopped bench stops what it started (the fleet, a run in flight): the `finally`
    # blocks run on SIGTERM as on Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
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
