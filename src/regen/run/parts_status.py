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
        rows.append(
            {
                "shard": part_label(name),
                "state": snap["state"],
                "alive": running and age < STALE_AFTER_S,
                "stale": running and age >= STALE_AFTER_S,
                "finished": snap["finished"],
                "total": snap["total"],
                "completions_per_s": snap["rates"]["last_1m"]["completions_per_s"],
                "eta_s": snap["eta_s"],
                "host": snap["host"],
                "pid": snap.get("pid"),
                "heartbeat_s_ago": round(age, 1),
                "from": (snap.get("shard") or {}).get("from"),
            }
        )
    finished = sum(r["finished"] for r in rows)
    total = sum(r["total"] for r in rows)
    rate = sum(r["completions_per_s"] for r in rows if r["alive"])
    whole = {
        "finished": finished,
        "total": total,
        "completions_per_s": round(rate, 3),
        "eta_s": (total - finished) / rate if rate > 0 else None,
        "alive": sum(r["alive"] for r in rows),
        "stale": sum(r["stale"] for r in rows),
    }
    return {"parts": rows, "whole": whole}


def with_shards(alive: dict[str, Any], parts: dict[str, dict], count: int) -> dict[str, Any]:
    """The `alive` and `shards` entries; a sharded run is alive while any part is, and
    finished once all `count` parts (the N the run records) are."""
    if not parts:
        return {"alive": alive, "shards": None}
    shards = shard_rows(parts)
    started = {row["shard"] for row in shards["parts"]}
    shards["not_started"] = [f"{i}/{count}" for i in range(count) if f"{i}/{count}" not in started]
    whole = shards["whole"]
    how = f"{whole['alive']} of {count} shards have a fresh heartbeat"
    states = {row["state"] for row in shards["parts"]}
    finished = states == {RunState.FINISHED} and not shards["not_started"]
    state = RunState.FINISHED if finished else None
    alive = {**alive, "alive": whole["alive"] > 0, "how": how, "state": state}
    return {"alive": alive, "shards": shards}


def render_shards(info: dict[str, Any], format_duration) -> list[str]:
    lines = []
    for r in info["parts"]:
        flag = "STALE (heartbeat stopped; rerun this part)" if r["stale"] else r["state"]
        # `--shard` on the part's own command line goes without saying; a scheduler's does not
        origin = f" (from {r['from']})" if r.get("from") not in (None, "--shard") else ""
        lines.append(
            f"  shard {r['shard']}{origin}: {flag}, {r['finished']}/{r['total']} done, "
            f"{r['completions_per_s']:.2f}/s, ETA {format_duration(r['eta_s'])}, "
            f"{_process(r)}, heartbeat {r['heartbeat_s_ago']:.0f}s ago"
        )
    missing = info.get("not_started") or []
    lines += [f"  shard {label}: not started (run it with --shard {label})" for label in missing]
    w = info["whole"]
    of = f" of the {len(info['parts'])} started" if missing else ""
    lines.append(
        f"whole{of}: {w['finished']}/{w['total']} done, {w['completions_per_s']:.2f}/s, "
        f"ETA {format_duration(w['eta_s'])}, {w['alive']} running, {w['stale']} stale"
    )
    return lines


def _process(row: dict[str, Any]) -> str:
    """The shard's process, as its progress file names it (a file from before the pid was
    kept names the host only)."""
    return f"pid {row['pid']} on {row['host']}" if row.get("pid") else str(row["host"])
