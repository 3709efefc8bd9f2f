"""`regen status` of a sharded run: one row per part (from its own progress file) and the
whole. A part whose heartbeat stopped while it was not finished is *stale*: its process died
or lost its network; rerun that part (same --shard I/N) to resume it."""

from __future__ import annotations

import time
from typing import Any

from regen.format.state import STALE_AFTER_S, RunState, is_final


def part_label(progress_file: str) -> str:
    """progress-0003-of-0008.json -> 3/8"""
    name = progress_file.removeprefix("progress-").removesuffix(".json")
    index, _, count = name.partition("-of-")
    return f"{int(index)}/{int(count)}"


def shard_rows(progresses: dict[str, dict], now: float | None = None) -> dict[str, Any]:
    """progresses: {progress file name: snapshot} for files named progress-<part>.json."""
    now = now or time.time()
    rows = []
    for name, snap in sorted(progresses.items()):
        age = now - snap["updated_unix"]
        running = not is_final(snap["state"])
        rows.append({
            "shard": part_label(name),
            "state": snap["state"],
            "alive": running and age < STALE_AFTER_S,
            "stale": running and age >= STALE_AFTER_S,
            "finished": snap["finished"], "total": snap["total"],
            "completions_per_s": snap["rates"]["last_1m"]["completions_per_s"],
            "eta_s": snap["eta_s"], "host": snap["host"], "heartbeat_s_ago": round(age, 1),
        })  # fmt: skip
    finished = sum(r["finished"] for r in rows)
    total = sum(r["total"] for r in rows)
    rate = sum(r["completions_per_s"] for r in rows if r["alive"])
    whole = {
        "finished": finished, "total": total, "completions_per_s": round(rate, 3),
        "eta_s": (total - finished) / rate if rate > 0 else None,
        "alive": sum(r["alive"] for r in rows), "stale": sum(r["stale"] for r in rows),
    }  # fmt: skip
    return {"parts": rows, "whole": whole}


def with_shards(alive: dict[str, Any], parts: dict[str, dict]) -> dict[str, Any]:
    """The `alive` and `shards` entries; a sharded run is alive while any part is."""
    if not parts:
        return {"alive": alive, "shards": None}
    shards = shard_rows(parts)
    whole = shards["whole"]
    how = f"{whole['alive']} of {len(parts)} shards have a fresh heartbeat"
    states = {row["state"] for row in shards["parts"]}
    state = RunState.FINISHED if states == {RunState.FINISHED} else None
    alive = {**alive, "alive": whole["alive"] > 0, "how": how, "state": state}
    return {"alive": alive, "shards": shards}


def render_shards(info: dict[str, Any], format_duration) -> list[str]:
    lines = []
    for r in info["parts"]:
        flag = "STALE (heartbeat stopped; rerun this part)" if r["stale"] else r["state"]
        lines.append(
            f"  shard {r['shard']}: {flag}, {r['finished']}/{r['total']} done, "
            f"{r['completions_per_s']:.2f}/s, ETA {format_duration(r['eta_s'])}, "
            f"{r['host']}, heartbeat {r['heartbeat_s_ago']:.0f}s ago"
        )
    w = info["whole"]
    lines.append(
        f"whole: {w['finished']}/{w['total']} done, {w['completions_per_s']:.2f}/s, "
        f"ETA {format_duration(w['eta_s'])}, {w['alive']} running, {w['stale']} stale"
    )
    return lines
