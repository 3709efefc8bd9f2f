"""Part 1 of bench_generate.py, fleet utilisation: `regen generate` on 8 capacity-limited fake
servers (equal; then one at half speed) against a naive static round-robin client and the
ceiling of a perfect client that does not know the answers' lengths in advance, all measured
at the servers (see bench_generate.py's docstring for how)."""

from __future__ import annotations

import asyncio
import heapq
import json
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from fleet_processes import MODEL, ServerSpec, fleet, fleet_stats
from generate_child import regen_cmd, run_regen, write_prompts
from generate_sizes import Sizes

MAX_TOKENS = 4096  # regen's default --max-output-tokens; the naive client sends the same


def request_body(i: int) -> dict[str, Any]:
    """What regen sends for prompt i (with default sampling), for the naive client."""
    content = f"question p{i:07d}"
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": content}],
        "stream": False,
        "max_tokens": MAX_TOKENS,
    }


# -- the naive client --------------------------------------------------------------------
async def round_robin(urls: list[str], count: int, concurrency: int, timeout: float) -> int:
    """Prompt i goes to server i % N; each server gets `concurrency` workers of its own, so a
    fast server never waits on a slow one's queue (the most generous static split)."""

    async def worker(session: aiohttp.ClientSession, url: str, todo: list[int]) -> int:
        done = 0
        while todo:
            body = orjson.dumps(request_body(todo.pop()))
            async with session.post(url + "/v1/chat/completions", data=body) as resp:
                orjson.loads(await resp.read())
                done += resp.status == 200
        return done

    async def one_server(k: int, url: str) -> int:
        todo = list(range(k, count, len(urls)))[::-1]  # pop() takes the lowest index first
        connector = aiohttp.TCPConnector(limit=concurrency)
        headers = {"Content-Type": "application/json"}
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
            done = await asyncio.gather(*(worker(session, url, todo) for _ in range(concurrency)))
        return sum(done)

    jobs = (one_server(k, url) for k, url in enumerate(urls))
    return sum(await asyncio.wait_for(asyncio.gather(*jobs), timeout))


def fleets(sz: Sizes) -> dict[str, list[ServerSpec]]:
    base = ServerSpec(sz.slots, sz.seconds_per_token, sz.tokens, sz.jitter)
    slow = ServerSpec(sz.slots, 2 * sz.seconds_per_token, sz.tokens, sz.jitter)
    return {"8 equal": [base] * 8, "8, one at half speed": [base] * 7 + [slow]}


def utilisation(specs: list[ServerSpec], stats: dict[str, Any], prompts: int) -> dict[str, Any]:
    """Only distinct prompts count as served: an end-game copy that a server answered in
    full as well is work done twice, not throughput."""
    mean_tokens = stats["tokens"] / max(1, stats["served"])
    ideal = sum(s.slots / (mean_tokens * s.seconds_per_token) for s in specs)
    start = stats["first_request_at"]
    window = stats["last_served_at"] - start
    unique = min(stats["served"], prompts)
    achieved = unique / window
    # Steady state: only while the client still had prompts to send (up to the last prompt's
    # first request: end-game copies come after it), so the end-of-batch drain that every
    # client has is left out; the drain is the rest, measured at the servers.
    last_sent = stats["requested_at"][min(prompts, len(stats["requested_at"])) - 1]
    busy = last_sent - start
    steady = sum(1 for t in stats["served_at"] if t <= last_sent) / busy
    return {
        "completions": unique,
        "duplicate_requests": stats["requests"] - prompts,
        "duplicates_served": stats["served"] - unique,
        "window_s": round(window, 2),
        "fleet_drain_s": round(stats["last_served_at"] - last_sent, 3),
        "achieved_per_s": round(achieved, 1),
        "ideal_per_s": round(ideal, 1),
        "utilisation": round(achieved / ideal, 4),
        "steady_utilisation": round(steady / ideal, 4),
        "per_server": stats["per_server"],
    }


def length_blind_ceiling(specs: list[ServerSpec], prompts: int) -> float:
    """The utilisation of a perfect client that does not know the answers' lengths in
    advance: zero overhead, each prompt in input order to the slot that frees up first.
    Its only loss is the drain (the last requests' own lengths). The lengths are the ones
    the fake servers give these prompts, so this is the ceiling of this very measurement."""
    from regen.testing.fake_behaviour import echo_answer
    from regen.testing.fake_server import answer_tokens

    spec = specs[0]
    lengths = [
        answer_tokens(echo_answer(request_body(i))["content"], spec.tokens, spec.jitter)
        for i in range(prompts)
    ]
    per_token = [s.seconds_per_token for s in specs for _ in range(s.slots)]  # one per slot
    free = [(0.0, slot) for slot in range(len(per_token))]  # (when it frees up, which)
    for tokens in lengths:
        at, slot = heapq.heappop(free)
        heapq.heappush(free, (at + tokens * per_token[slot], slot))
    end = max(at for at, _ in free)
    mean = sum(lengths) / prompts
    ideal = sum(s.slots / (mean * s.seconds_per_token) for s in specs)
    return prompts / end / ideal


def bench_utilisation(
    sz: Sizes, work: Path, timeout: float, bucket: str | None = None, naive: bool = True
) -> list[dict[str, Any]]:
    prompts = work / "util-prompts.jsonl"
    write_prompts(prompts, sz.util_prompts)
    results = []
    for name, specs in fleets(sz).items():
        # A fresh fleet per client, so each one's /stats counts only its own traffic.
        with fleet(specs) as urls:
            out: Path | str = work / f"util-{len(results)}"
            if bucket:  # --bucket: the run's output goes to moto's S3 on loopback
                out = f"{bucket}/util-{len(results)}"
            shutil.rmtree(out, ignore_errors=True)
            run_regen(regen_cmd(prompts, out, urls, sz.slots), timeout, work / "regen.log")
            measured = utilisation(specs, fleet_stats(urls), sz.util_prompts)
            ceiling = length_blind_ceiling(specs, sz.util_prompts)
            measured["length_blind_ceiling"] = round(ceiling, 4)
            results.append({"fleet": name, "client": "regen", **measured, **end_game(out)})
        print_row(results[-1])
        if not naive:
            continue
        with fleet(specs) as urls:
            asyncio.run(round_robin(urls, sz.util_prompts, sz.slots, timeout))
            measured = utilisation(specs, fleet_stats(urls), sz.util_prompts)
            results.append({"fleet": name, "client": "naive round-robin", **measured})
        print_row(results[-1])
    return results


def end_game(out: Path | str) -> dict[str, Any]:
    """What regen's last snapshot says of the end of the batch (a local run's only; a
    baseline without an end game says nothing)."""
    path = Path(out) / "progress.json"
    if "://" in str(out) or not path.exists():
        return {}
    return json.loads(path.read_text()).get("end_game") or {}


def print_row(row: dict[str, Any]) -> None:
    drain = row.get("drain") or {}
    print(
        f"  {row['fleet']:<22} {row['client']:<18} {row['completions']:>6} in "
        f"{row['window_s']:>6.1f} s = {row['achieved_per_s']:>6.1f}/s of "
        f"{row['ideal_per_s']:.1f}/s ideal: utilisation {row['utilisation']:.3f} "
        f"(steady state {row['steady_utilisation']:.3f}, drain {row['fleet_drain_s']:.2f} s); "
        f"{row['duplicate_requests']} duplicate requests, {row['duplicates_served']} served"
        + (
            f"; a length-blind client's ceiling {row['length_blind_ceiling']:.3f}"
            if "length_blind_ceiling" in row
            else ""
        )
        + (
            f"; regen: drain {drain['seconds']:.2f} s, {drain['idle_ratio']:.0%} idle, copies "
            f"{row['copies_started']} ({row['copies_won']} won)"
            if drain
            else ""
        ),
        flush=True,
    )
