"""`regen plan --from-run DIR`: the time and cost left in a run, from its own files and
rates, with the same estimator as `regen status`'s ETA (`regen.run.eta`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from regen.plan.calibrate import Pricing
from regen.run.eta import from_status
from regen.run.status import read_status


def from_run(output_dir: str | Path, pricing: Pricing | None = None) -> dict[str, Any]:
    pricing = pricing or Pricing()
    info = read_status(output_dir)
    left = from_status(info)
    progress = info["progress"] or {}
    servers = progress.get("servers") or [{"url": u} for u in info["manifest"]["config"]["servers"]]
    seconds, low, high = left.seconds, left.seconds_low, left.seconds_high
    if left.items == 0:  # a finished run: nothing left takes no time (not "unknown")
        seconds = low = high = 0.0
    tokens_per_item = (
        left.output_tokens / left.items if left.output_tokens is not None and left.items else None
    )
    return {
        "output_dir": info["output_dir"],
        "state": info["alive"]["state"],
        "alive": info["alive"]["alive"],
        "prompts": info["manifest"]["input"]["lines"],
        "items": info["count"]["items"],
        "finished": info["files"]["completions"] + info["files"]["errors"],
        "unusable_lines": info["count"]["unusable_lines"],
        "remaining": left.items,
        "wall_seconds": seconds,
        "wall_seconds_p10": low,
        "wall_seconds_p90": high,
        "output_tokens": left.output_tokens,
        "output_tokens_per_second": left.tokens_per_second,
        "completions_per_second": (
            left.tokens_per_second / tokens_per_item
            if left.tokens_per_second and tokens_per_item
            else None
        ),
        "cost_usd": None if seconds is None else pricing.cost(seconds, len(servers)),
        "servers": servers,
    }
