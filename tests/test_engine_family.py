"""The family of engines live concurrency is judged on (issue 56), and the fleet that runs
it in virtual time: a draw replays from its seed, the draws span the issue's ranges, and
in virtual time every prompt is answered once and a fixed level is kept exactly.

The virtual fleet runs regen's own controller on a clock it moves itself, so what is
asserted here holds on a loaded machine as on a quiet one (no wall time is measured)."""

from __future__ import annotations

from dataclasses import replace

from regen.testing.engine_family import FAULT_KINDS, draw
from regen.testing.fake_scheduler import EngineCurve
from regen.testing.sim_fleet import Busy, SimFleet


def test_a_draw_replays_from_its_seed():
    assert draw(7) == draw(7)
    assert draw(7) != draw(8)


def test_the_draws_span_the_issues_ranges():
    """Knees of 16 to 1,024 in flight in three shapes, a KV cache before and far after the
    knee, cliffs from mild to thrashing, answers of 100 to 8,000 tokens, /metrics or none,
    every kind of fault, a slow server and a busy client: each within 300 draws."""
    draws = [draw(seed) for seed in range(300)]
    knees = [d.knee for d in draws]
    assert min(knees) < 24 and max(knees) > 700
    assert {d.shape for d in draws} == {"cap", "peak", "flat"}
    assert any(d.kv_fit < 0.5 * d.knee for d in draws)
    assert any(d.kv_fit > 4 * d.knee for d in draws)
    assert min(d.cliff for d in draws) < 0.1 and max(d.cliff for d in draws) > 3
    assert min(d.tokens for d in draws) < 150 and max(d.tokens for d in draws) > 6000
    assert {d.curves[-1].metrics for d in draws} == {True, False}
    kinds = {f for d in draws for f in d.faults} - {"ok"}
    assert kinds == set(FAULT_KINDS.values()) | {"429"}
    assert any(not d.faults for d in draws)
    assert any(d.curves[0] != d.curves[-1] for d in draws)  # one slow server
    assert any(d.busy_client for d in draws)
    assert all(d.fixed_levels() for d in draws)


def test_in_virtual_time_each_prompt_is_answered_once_through_every_fault():
    curve = EngineCurve(max_running=64, kv_tokens=48 * 160, time_scale=0.5, ticks=8)
    faults = ("ok",) * 36 + ("stream_error", "stream_refused", "stall", "429")  # 10%
    fleet = SimFleet([curve] * 3, [100] * 800, faults, busy=Busy(lag=0.2, sends_per_s=300.0))
    result = fleet.run()
    assert (result.answered, result.answers) == (800, 800)
    assert max(result.peaks) > 16  # it climbed from the start


def test_in_virtual_time_a_fixed_level_is_kept_exactly():
    curve = EngineCurve(max_running=32, kv_tokens=10**6, time_scale=0.05, ticks=8)
    result = SimFleet([curve] * 2, [50] * 300, fixed=24).run()
    assert result.peaks == [24, 24] and result.levels == [24, 24]
    assert result.answered == 300


def test_a_smaller_draw_is_the_same_engines():
    """The CI's family runs fewer prompts a draw than the bench, on the same curves."""
    d = draw(3)
    small = replace(d, prompts=500)
    assert small.curves == d.curves and small.fixed_levels() == d.fixed_levels()
