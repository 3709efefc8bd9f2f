"""The fake engines' scheduler as a plain object (fake_scheduler.py): steps between events
taken at once yet decoded exactly as one at a time, a cliff past the KV cache as hard as its
recompute costs, and a curve that falls past its peak. Rates are on the simulated clock."""

from __future__ import annotations

from dataclasses import replace

from regen.testing.fake_scheduler import EngineCurve, Scheduler


def _drain(curve: EngineCurve, jobs: int, wanted: int, level: int | None = None) -> Scheduler:
    """`jobs` requests of 60 distinct words each, `level` of them in the engine at a time
    (all at once without one), until every one is decoded."""
    engine = Scheduler(curve)
    prompts = [[f"p{i}w{j}" for j in range(60)] for i in range(jobs)]
    level = level or jobs
    pending, running = list(prompts), 0
    while pending or running:
        while pending and running < level:
            engine.add(pending.pop(), wanted + len(pending) % 7)
            running += 1
        _, finished = engine.tick()
        running -= len(finished)
    return engine


def _rate(engine: Scheduler) -> float:
    return engine.counters.generation_tokens / engine.counters.clock


def test_a_tick_of_many_steps_decodes_exactly_as_single_steps_do():
    """A long answer costs the fake no more CPU than a short one, and decodes the same: the
    same tokens, preemptions and simulated seconds, one step a tick or 500."""
    curve = EngineCurve(kv_tokens=30 * 250, prefill_s=0.001, ticks=1)
    one = _drain(curve, jobs=48, wanted=300)
    many = _drain(replace(curve, ticks=500), jobs=48, wanted=300)
    assert one.counters.preemptions > 0  # the cache is too small for 64: a cliff is crossed
    for field in ("generation_tokens", "preemptions", "finished", "prompt_tokens"):
        assert getattr(many.counters, field) == getattr(one.counters, field), field
    assert abs(many.counters.clock - one.counters.clock) < 1e-6 * one.counters.clock


def test_the_cliff_past_the_kv_cache_bites_as_hard_as_a_recompute_costs():
    """Twice what the cache holds in flight: a recompute that costs little (mild) loses
    little against what fits; one that costs several decode tokens a token thrashes."""
    fits = 32
    curve = EngineCurve(kv_tokens=fits * (60 + 100), per_seq_s=0.0004, ticks=32)
    below = _rate(_drain(curve, jobs=128, wanted=200, level=fits))
    mild = _rate(_drain(replace(curve, recompute_s=0.00001), jobs=128, wanted=200, level=2 * fits))
    harsh = _rate(_drain(replace(curve, recompute_s=0.005), jobs=128, wanted=200, level=2 * fits))
    assert mild > 0.85 * below, (mild, below)
    assert harsh < 0.6 * below, (harsh, below)


def test_output_falls_past_its_peak_where_steps_slow_faster_than_the_batch_grows():
    knee = 40
    curve = EngineCurve(
        step_s=0.02,
        per_seq_s=0.02 / (4 * knee),
        per_seq2_s=0.02 / knee**2,
        max_running=10**6,
        ticks=16,
    )
    rates = {n: _rate(_drain(curve, jobs=2 * n, wanted=100, level=n)) for n in (10, 40, 160)}
    assert rates[40] > 1.5 * rates[10] and rates[160] < 0.8 * rates[40], rates
