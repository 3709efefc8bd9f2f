"""Benchmark of the streamed path: regen's CPU per token against a bare client, and memory.

    .venv/bin/python bench/bench_stream.py                       # both parts (~4 min, 2 cores)
    .venv/bin/python bench/bench_stream.py --parts cost --quick  # a quarter of the tokens
    .venv/bin/python bench/bench_stream.py --baseline-src /tmp/old/src   # + an older tree

Servers: 8 cheap vLLM-shaped streaming engines in one separate process
(`python -m regen.testing.sse_fleet`: pre-encoded events, so their CPU is theirs, not the
client's); one token an event unless `--tokens-per-event`, reasoning then content, token ids
in every chunk, usage at the end.

1. cost: answers of 500, 16,000 and 32,000 tokens (4,000 x 500, 64 x 16K, 32 x 32K; 64
   streams at once), fetched by `regen generate --stream --return-token-ids` and by a bare
   aiohttp client that reads each line, parses every event with orjson, joins the text and
   extends a list of ids (`--bare`, this file), side by side in one run. CPU seconds of each
   reaped child from the kernel (getrusage of children), less the same command with nothing
   to do (start-up: imports, preflight, ledger), over the tokens received.
2. memory: 8 servers x 512 streams of 16K-token answers (8 tokens an event: the memory per
   token is the same, the bench 8x shorter). regen's RSS with every stream open before the
   first token (its idle size), then with every answer held by its server 15/16 of the way
   (so every token sent has been read: none waits in a socket): bytes per token in flight =
   (held - idle) / tokens in flight. And the peak RSS over the run, answers' ends included.

Results: a table on stdout and `.bench/stream.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import psutil

from fleet_processes import stop
from generate_child import run_regen, write_prompts
from sse_helpers import PeakRss, SseFleet, regen_cmd, wait
from workspace import BENCH_DIR

COST_CASES = [(500, 4_000), (16_000, 64), (32_000, 32)]  # (tokens an answer, answers)
STREAMS = 8  # per server in the cost part: 64 at once


# -- the bare client ---------------------------------------------------------------------
async def bare_client(urls: list[str], count: int, per_server: int) -> int:
    """The least a Python client does: a line at a time, orjson, text joined, ids extended."""

    async def one(session: aiohttp.ClientSession, url: str, i: int) -> int:
        body = {
            "model": "fake-model",
            "stream": True,
            "return_token_ids": True,
            "messages": [{"role": "user", "content": f"question p{i:07d}"}],
            "stream_options": {"include_usage": True},
            "max_tokens": 40_000,
        }
        text, ids = [], []
        async with session.post(url + "/v1/chat/completions", data=orjson.dumps(body)) as resp:
            async for line in resp.content:
                if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                    continue
                for choice in orjson.loads(line[6:])["choices"]:
                    delta = choice["delta"]
                    piece = delta.get("content") or delta.get("reasoning")
                    if piece:
                        text.append(piece)
                    ids.extend(choice.get("token_ids") or ())
        return len("".join(text)) and len(ids)

    async def server(url: str, todo: list[int]) -> int:
        connector = aiohttp.TCPConnector(limit=per_server)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def worker() -> int:
                got = 0
                while todo:
                    got += await one(session, url, todo.pop())
                return got

            return sum(await asyncio.gather(*(worker() for _ in range(per_server))))

    plan = [list(range(k, count, len(urls))) for k in range(len(urls))]
    return sum(await asyncio.gather(*(server(u, t) for u, t in zip(urls, plan, strict=True))))


# -- 1. cost -----------------------------------------------------------------------------
def client_runs(work: Path, fleet: SseFleet, count: int, srcs: dict[str, str]) -> dict:
    """µs of CPU a token for each client over the same `count` answers, start-up taken off."""
    prompts, log, urls = work / "prompts.jsonl", work / "client.log", fleet.urls
    write_prompts(prompts, count)
    bare = [sys.executable, __file__, "--bare", str(count), *urls]
    runs = {"bare": (bare, [*bare[:3], "0", *urls])}
    for name, src in srcs.items():
        shutil.rmtree(work / f"out-{name}", ignore_errors=True)
        cmd = regen_cmd(src, prompts, work / f"out-{name}", urls, STREAMS)
        runs[name] = (cmd, cmd)  # the same command again has nothing left to do
    out: dict[str, float] = {}
    for name, (cmd, idle_cmd) in runs.items():
        before = fleet.total("tokens_sent")
        run = run_regen(cmd, 900, log)
        tokens = fleet.total("tokens_sent") - before
        idle = run_regen(idle_cmd, 900, log)
        out[name] = round(1e6 * max(run.cpu_s - idle.cpu_s, 1e-9) / tokens, 2)
    return out


def bench_cost(work: Path, srcs: dict[str, str], scale: float, per_event: int) -> list[dict]:
    rows = []
    for tokens, answers in COST_CASES:
        count = max(8, int(answers * scale))
        fleet = SseFleet(8, slots=STREAMS, tokens=tokens, tokens_per_event=per_event)
        with fleet:
            per_token = client_runs(work / f"cost-{tokens}", fleet, count, srcs)
        ratios = {n: round(v / per_token["bare"], 2) for n, v in per_token.items() if n != "bare"}
        cores = {n: round(v * 30_000 / 1e6, 3) for n, v in per_token.items()}
        row = {
            "tokens": tokens,
            "answers": count,
            "us_per_token": per_token,
            "ratio_to_bare": ratios,
            "cores_at_30k": cores,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


# -- 2. memory ---------------------------------------------------------------------------
FIRST_TOKEN_S = 10.0  # every stream open, no token yet: the process's idle size
HOLD_S = 20.0  # answers pause near their end: every token sent is then read


def bench_memory(work: Path, src: str, streams: int, tokens: int, per_event: int) -> dict:
    """RSS with every stream open and no token, then with every answer held 15/16 of the way
    (the client has read all that was sent), and the peak over the whole run."""
    prompts, total = work / "memory-prompts.jsonl", 8 * streams
    write_prompts(prompts, total)
    hold_at = tokens * 15 // 16
    fleet = SseFleet(
        8,
        slots=streams,
        tokens=tokens,
        tokens_per_event=per_event,
        events_per_write=4,
        first_token_s=FIRST_TOKEN_S,
        hold_at=hold_at,
        hold_s=HOLD_S,
    )
    shutil.rmtree(work / "memory-out", ignore_errors=True)
    with fleet as urls, open(work / "memory.log", "wb") as log:
        cmd = regen_cmd(src, prompts, work / "memory-out", urls, streams)
        child = subprocess.Popen(cmd, stdout=log, stderr=log)
        proc = psutil.Process(child.pid)
        peak = PeakRss(proc)
        try:
            wait(lambda: fleet.total("running") == total, 60, "every stream open")
            time.sleep(1.0)
            idle = proc.memory_info().rss
            wait(lambda: fleet.total("held") == total, 900, "every answer held")
            time.sleep(HOLD_S / 4)  # what the sockets still hold is read
            held, stats = proc.memory_info().rss, fleet.stats()
            child.wait(timeout=900)
        finally:
            stop(child)
    in_flight = sum(s["tokens_sent"] - s["tokens_done"] for s in stats)
    return {
        "streams": total,
        "tokens_an_answer": tokens,
        "tokens_per_event": per_event,
        "idle_rss_mb": round(idle / 2**20, 1),
        "held_rss_mb": round(held / 2**20, 1),
        "tokens_in_flight": in_flight,
        "expected_in_flight": total * hold_at,
        "bytes_per_token": round((held - idle) / max(in_flight, 1), 2),
        "peak_rss_mb": round(peak.stop() / 2**20, 1),
    }


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="cost,memory")
    ap.add_argument("--quick", action="store_true", help="a quarter of the answers / streams")
    ap.add_argument("--baseline-src", help="also run regen from this src/ (an older tree)")
    ap.add_argument("--tokens-per-event", type=int, default=1, help="cost part")
    ap.add_argument("--bare", nargs="+", help=argparse.SUPPRESS)  # COUNT URL...: the client
    ap.add_argument("--bare-streams", type=int, default=STREAMS, help=argparse.SUPPRESS)
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.bare:
        count, urls = int(args.bare[0]), args.bare[1:]
        print(asyncio.run(bare_client(urls, count, args.bare_streams)) if count else 0)
        return
    here = str(Path(__file__).resolve().parent.parent / "src")
    srcs = {"regen": here}
    if args.baseline_src:
        srcs["baseline"] = str(Path(args.baseline_src).resolve())
    work = BENCH_DIR / "stream-work"
    work.mkdir(parents=True, exist_ok=True)
    scale = 0.25 if args.quick else 1.0
    results: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "cpus": os.cpu_count(),
        "load_avg_at_start": os.getloadavg(),
    }
    parts = set(args.parts.split(","))
    if "cost" in parts:
        results["cost"] = bench_cost(work, srcs, scale, args.tokens_per_event)
    if "memory" in parts:
        streams = 128 if args.quick else 512
        results["memory"] = bench_memory(work, here, streams, 16_000, 8)
        print(json.dumps(results["memory"]), flush=True)
    results["load_avg_at_end"] = os.getloadavg()
    (BENCH_DIR / "stream.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {BENCH_DIR / 'stream.json'}")


if __name__ == "__main__":
    main()
