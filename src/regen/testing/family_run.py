"""A draw of the engine family (engine_family.py) run in virtual time (sim_fleet.py):
regen's defaults, or a fixed level, on the draw's fleet, faults and client."""

from __future__ import annotations

import math
import random
from dataclasses import replace

from regen.testing.engine_family import Draw
from regen.testing.fake_scheduler import EngineCurve
from regen.testing.sim_fleet import Busy, Result, SimFleet

TICK_S = 0.05  # an engine's tick, on the scaled clock, at least
BUSY = Busy(lag=0.3, sends_per_s=500.0)  # a busy client: its loop up to 0.3 s late a tick


def run_draw(draw: Draw, fixed: int | None = None, last: dict[str, int] | None = None) -> Result:
    """One run of a family draw in virtual time: regen's defaults, or `fixed` in flight."""
    rng = random.Random(draw.seed)
    lengths = [
        max(1, round(draw.tokens * (1 + draw.jitter * rng.uniform(-1, 1))))
        for _ in range(draw.prompts)
    ]
    busy = BUSY if draw.busy_client else None
    fleet = SimFleet(
        [_coarse(curve) for curve in draw.curves],
        lengths,
        draw.faults,
        fixed=fixed,
        busy=busy,
        seed=draw.seed,
        stall_timeout=draw.stall_timeout,
        last=last,
    )
    return fleet.run()


def _coarse(curve: EngineCurve) -> EngineCurve:
    """Ticks of about TICK_S of the scaled clock: finer than the controller reads."""
    tick = curve.step_seconds(min(curve.max_running, 64)) * curve.time_scale
    return replace(curve, ticks=max(curve.ticks, math.ceil(TICK_S / tick)))
