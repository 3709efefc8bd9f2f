"""Part 2 of bench_generate.py, client cost: completions/s and CPU of one `regen generate`
process against zero-latency fake servers with ~8 KB answers. CPU-seconds come from the
kernel's accounting of the reaped child, so the fake servers' CPU on the same cores is not
counted in it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from fleet_processes import ServerSpec, fleet, fleet_stats
from generate_child import regen_cmd, run_regen, write_prompts
from generate_sizes import Sizes


def bench_client_cost(
    sz: Sizes, work: Path, timeout: float, bucket: str | None = None
) -> dict[str, Any]:
    prompts, log = work / "cost-prompts.jsonl", work / "regen.log"
    out: Path | str = f"{bucket}/cost-out" if bucket else work / "cost-out"
    write_prompts(prompts, sz.cost_prompts)
    shutil.rmtree(out, ignore_errors=True)
    spec = ServerSpec(sz.cost_concurrency, 0.0, 8, pad_bytes=8000)
    try:
        with fleet([spec] * sz.cost_servers) as urls:
            cmd = regen_cmd(prompts, out, urls, sz.cost_concurrency)
            run = run_regen(cmd, timeout, log)
            stats = fleet_stats(urls)
            # The same command again has nothing to do: its CPU is the fixed start-up cost
            # (imports, preflight, fingerprint, ledger scan), not a per-completion cost.
            idle = run_regen(cmd, timeout, log)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    served = stats["served"]
    window = stats["last_served_at"] - stats["first_request_at"]
    marginal = max(run.cpu_s - idle.cpu_s, 1e-9)
    return {
        "completions": served,
        "servers": sz.cost_servers,
        "concurrency_per_server": sz.cost_concurrency,
        "response_bytes": 8000,
        "window_s": round(window, 2),
        "completions_per_s": round(served / window, 1),
        "process_wall_s": round(run.wall_s, 2),
        "client_cpu_s": round(run.cpu_s, 2),
        "startup_cpu_s": round(idle.cpu_s, 2),
        "cpu_s_per_1000": round(1000 * run.cpu_s / served, 3),
        "cpu_s_per_1000_marginal": round(1000 * marginal / served, 3),
        "cpu_bound_ceiling_per_s": round(served / marginal, 1),
        "peak_rss_mb": round(run.peak_rss_mb, 1),
    }
