"""A draw of the engine family (engine_family.py) run in virtual time (sim_fleet.py):
regen's defaults, or a fixed level, on the draw's fleet, faults and client."""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import replace

from regen.testing.engine_family import Draw
from regen.testing.fake_scheduler import EngineCurve
from regen.testing.sim_fleet import Busy, Result, SimFleet

TICK_S = 0.05  # an engine's tick, on the scaled clock, at least
BUSY = Busy(lag=0.3, sends_per_s=500.0)  # a busy client: its loop up to 0.3 s late a tick


def run_draw(
    draw: Draw, fixed: int | None = None, last: dict[str, int] | None = None, order: int = 0
) -> Result:
    """One run of a family draw in virtual time: regen's defaults, or `fixed` in flight.
    `order` runs the same engines on the same answers in another order (and draws the
    client's lateness, the retries' delays and the stalls' cuts anew): a run is chaotic (a
    window that closes a little earlier moves every later one), so a rule is judged over
    several orders of each draw (bench_family.py --orders)."""
    seed = draw.seed if order == 0 else hash_seed(draw.seed, order)
    busy = BUSY if draw.busy_client else None
    fleet = SimFleet(
        [_coarse(curve) for curve in draw.curves],
        answer_lengths(draw, order),
        draw.faults,
        fixed=fixed,
        busy=busy,
        seed=seed,
        stall_timeout=draw.stall_timeout,
        last=last,
    )
    return fleet.run()


def answer_lengths(draw: Draw, order: int = 0) -> list[int]:
    """The draw's answer lengths, prompt by prompt: order 0 as drawn, any other shuffled."""
    rng = random.Random(draw.seed)
    lengths = [
        max(1, round(draw.tokens * (1 + draw.jitter * rng.uniform(-1, 1))))
        for _ in range(draw.prompts)
    ]
    if order:
        random.Random(hash_seed(draw.seed, order)).shuffle(lengths)
    return lengths


def _coarse(curve: EngineCurve) -> EngineCurve:
    """Ticks of about TICK_S of the scaled clock: finer than the controller reads."""
    tick = curve.step_seconds(min(curve.max_running, 64)) * curve.time_scale
    return replace(curve, ticks=max(curve.ticks, math.ceil(TICK_S / tick)))


def hash_seed(seed: int, order: int) -> int:
    """A seed of its own for each order of a draw (the same on every machine and run)."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{order}".encode()).digest()[:8], "big")
