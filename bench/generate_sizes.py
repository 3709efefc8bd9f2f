"""How big each part of bench_generate.py runs: the full sizes that the targets are set at,
and `--quick`'s, scaled down to check the bench itself (too small to compare with them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    util_prompts: int = 6_400  # ~25-50 s per fleet measurement
    slots: int = 16
    tokens: int = 50
    seconds_per_token: float = 0.01  # 0.5 s mean service time (0.25-0.75 s)
    jitter: float = 0.5
    cost_prompts: int = 50_000  # ~400 MB of output, deleted afterwards
    cost_servers: int = 2
    cost_concurrency: int = 64
    resume_prompts: int = 1_000_000
    resume_new: int = 2_000
    shard_records: int = 20_000
    record_bytes: int = 0  # pad each synthesized completion to about this size (0: ~330 B)


QUICK = Sizes(util_prompts=1_200, cost_prompts=5_000, resume_prompts=100_000, resume_new=500)
