"""`regen plan --sweep`: which per-server concurrency gives the most throughput without
overloading the servers.

Each level runs its own small calibration (in a temporary dir: these answers are not kept)
with enough prompts to fill every slot four times, the same prompts first at every level.
Throughput is compared at one answer mix (all levels' answers pooled). A batch job wants
throughput, not latency: the recommendation is the level with the most output tokens/s (the
lowest within NOISE of it: a small sample measures no finer), skipping a level whose requests
failed (an overloaded server's timeouts and 5xx). The lowest level within 10% of the best is
named beside it with its latency: the trade-off for a user who wants answers sooner. Each
level is run with --fixed-concurrency: live concurrency would move away from it.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from regen.plan.calibrate import calibrate
from regen.plan.estimate import mean_tokens
from regen.plan.measure import LATENCY_RESOLUTION_S, Observation, by_server
from regen.plan.sample import CalibrationSample, draw_sample
from regen.run.config import GenerateConfig
from regen.run.generate import Reporter

KNEE = 0.9  # the latency-minded alternative: the lowest level within 10% of the best
NOISE = 0.95  # levels within 5% of the best throughput count as equal: the lowest of them
WAVES = 4  # prompts per slot at each level: the last, partly empty wave weighs little


@dataclass(frozen=True)
class Level:
    concurrency: int
    prompts: int
    output_tokens_per_second: float
    latency_mean_s: float
    failed: int = 0  # requests that failed at this level


@dataclass(frozen=True)
class SweepResult:
    levels: list[Level]
    recommended: int  # the most throughput
    knee: int  # the lowest level within 10% of it: less latency for a little less throughput

    def to_json(self) -> dict:
        return {
            "levels": [vars(level) for level in self.levels],
            "recommended": self.recommended,
            "knee": self.knee,
        }


def default_levels(concurrency: int) -> list[int]:
    return sorted(
        {max(1, concurrency // 4), max(1, concurrency // 2), concurrency, concurrency * 2}
    )


def sweep(
    config: GenerateConfig,
    levels: list[int],
    *,
    sample_seed: int = 0,
    report: Reporter | None = None,
) -> SweepResult:
    servers = max(1, len(config.fleet.server_urls()))
    biggest = max(max(levels) * servers * WAVES, 20)
    sample = draw_sample(config.input.prompts, biggest, sample_seed)
    order = list(sample.lines)
    random.Random(sample_seed).shuffle(order)  # any prefix is then a fair mix of the strata
    measured: dict[int, list[Observation]] = {}
    failed: dict[int, int] = {}
    for level in sorted(levels):
        take = order[: max(level * servers * WAVES, 10)]
        part = CalibrationSample(
            sample.prompts,
            sample.bad_lines,
            sample.strata,
            {n: sample.lines[n] for n in take},
            {n: sample.ids[n] for n in take},
        )
        with tempfile.TemporaryDirectory(prefix="regen-sweep-") as tmp:
            fleet = replace(config.fleet, concurrency=level, fixed_concurrency=True)
            cal = calibrate(replace(config, fleet=fleet), Path(tmp), part, report)
            measured[level], failed[level] = cal.observations, cal.failed
    pooled = mean_tokens([o for group in measured.values() for o in group])
    results = [
        Level(
            level,
            len(group),
            round(_rate(group[level * servers :] or group, level) * pooled, 1),
            round(sum(o.latency for o in group) / len(group), 3),
            failed[level],
        )
        for level, group in measured.items()
    ]
    return SweepResult(results, *recommend(results))


def recommend(levels: list[Level]) -> tuple[int, int]:
    """(the level for throughput, the lowest within KNEE of it)."""
    clean = [r for r in levels if not r.failed] or levels
    best = max(r.output_tokens_per_second for r in clean)
    most = next(r.concurrency for r in clean if r.output_tokens_per_second >= NOISE * best)
    knee = next(r.concurrency for r in clean if r.output_tokens_per_second >= KNEE * best)
    return most, knee


def _rate(steady: list[Observation], level: int) -> float:
    """Completions per second by Little's law: `level` requests always in flight on each
    server, each holding its slot for the server's mean latency. `steady` leaves out the
    first wave (records are in completion order), which met empty queues."""
    return sum(
        level * len(g) / max(sum(o.latency for o in g), LATENCY_RESOLUTION_S * len(g))
        for g in by_server(steady).values()
    )
