"""Live concurrency looking for the top: the stated KV cache jumped to only after a steep
gain, no jump or doubling once a top is found, queues climbed through or left by what
they pay, and a step past a cliff left at once."""

from __future__ import annotations

from dataclasses import replace

from concurrency_helpers import full, run_curve
from regen.fleet.control import concurrency
from regen.fleet.control.concurrency import Level, decide


def test_the_stated_kv_cache_is_jumped_to_only_after_a_measured_steep_gain():
    first = decide(concurrency.start(cap=1024), full(160.0, kv_fit=800))
    assert first.limit == 32  # one window is no curve: a plain doubling
    steep = decide(first, full(320.0, kv_fit=800))
    assert steep.limit == 64  # one step that paid is no curve either
    steeper = decide(steep, full(630.0, kv_fit=800))
    assert steeper.limit == 64 * concurrency.JUMP  # towards what the cache holds, bounded
    modest = decide(first, full(170.0, kv_fit=800))  # a CPU's curve: small steps, no jump
    assert modest.limit == 40
    flat = decide(first, full(162.0, kv_fit=800))
    assert flat.limit == 8 and flat.reason == "below"  # is the start past the top?
    back = decide(flat, full(150.0, kv_fit=800))
    assert back.limit == 16 and back.reason == "plateau"


def test_once_a_top_is_found_a_probe_never_jumps_or_doubles():
    """A CPU engine's curve jumps about: a probe from a plateau that happens to gain a lot
    steps by x1.25, not to the cache (a CPU fleet at 139 in flight runs at a quarter of 16's)."""
    level = concurrency.start(cap=1024)
    for rate in (160.0, 165.0):  # 16, then 32: no gain, so below; 8 is worse: back to 16
        level = decide(level, full(rate, kv_fit=800))
    level = decide(level, full(100.0, kv_fit=800))
    assert (level.limit, level.reason, level.first_climb) == (16, "plateau", False)
    for _ in range(concurrency.PROBE_EVERY):
        level = decide(level, full(160.0, kv_fit=800))
    assert (level.limit, level.reason) == (20, "probe")
    lucky = decide(level, full(260.0, kv_fit=800))  # +60%: one noisy window
    assert lucky.limit == 25 and lucky.reason == "climbing"
    resumed = concurrency.start(cap=1024, last=40)  # held where the last session left it
    for _ in range(concurrency.PROBE_EVERY):
        resumed = decide(resumed, full(100.0, kv_fit=800))
    assert (resumed.limit, resumed.reason) == (50, "probe")
    steep = decide(resumed, full(200.0, kv_fit=800))
    assert steep.limit == 63  # x1.25 from the probe's 50 (no jump to 400)


def test_a_sublinear_gain_doubles_but_never_jumps_to_the_cache():
    """vLLM's CPU build: 16 to 32 in flight gains ~40% (the cores are busy), or reads +70%
    when the first window held the first prefills; 150 is a cliff. A GPU far below its knee
    nearly doubles its output at each doubling."""
    first = decide(concurrency.start(cap=1024), full(80.0, kv_fit=900))
    for rate in (114.0, 136.0):
        cpu = decide(first, full(rate, kv_fit=900))
        assert cpu.limit == 64 and cpu.reason == "climbing"  # a doubling, no jump
    sublinear = decide(cpu, full(190.0, kv_fit=900))  # 64: +40% again
    assert sublinear.limit == 128
    gpu = decide(first, full(150.0, kv_fit=900))
    gpu = decide(gpu, full(290.0, kv_fit=900))  # +93%: the batch is still free
    assert gpu.limit == 64 * concurrency.JUMP


def test_a_queue_the_output_still_rises_through_is_climbed_through():
    """vLLM's CPU build (issue 34): prompts wait for their turn in a step's token budget, a
    queue at every level, and its output still rises to 128 in flight (fixed 32: 540 tok/s,
    128: 738). The queue is a hint, not the verdict: doublings that pay are taken."""

    def budgeted(n: int):
        rate = 540.0 * min(n, 128) ** 0.225 / 32**0.225  # +17% a doubling, flat past 128
        return rate, {"waiting": 0.4 * n, "running": 0.6 * n}

    history = run_curve(budgeted, concurrency.start(cap=1024), 30)
    reached = next(i for i, (level, _) in enumerate(history) if level.limit >= 128)
    assert reached <= 4, [level.limit for level, _ in history]
    late = [rate for _, rate in history[reached:]]
    assert sum(late) / len(late) >= 0.9 * budgeted(128)[0]


def test_a_queue_that_pays_nothing_is_left_for_what_runs_and_one_that_pays_is_kept():
    held = Level(limit=128, cap=1024, best_rate=700.0, best_limit=128, climbing=False, climbed=True)
    trial = decide(held, full(700.0, waiting=40.0, running=80.0))
    assert (trial.limit, trial.reason) == (84, "queue")  # one window at what runs
    stays = decide(trial, full(695.0, waiting=0.0, running=84.0))
    assert (stays.limit, stays.reason, stays.ceiling) == (84, "queue", 128)  # it paid nothing
    back = decide(trial, full(600.0, waiting=0.0, running=84.0))
    assert (back.limit, back.reason) == (128, "queue pays")
    for _ in range(5):  # and the queue is not tried again soon
        back = decide(back, full(700.0, waiting=40.0, running=80.0))
        assert back.limit >= 128


def test_a_step_past_a_cliff_is_left_at_once_and_not_tried_again_soon():
    """An engine without /metrics whose output rises to 256 in flight and falls by a third
    past it (its KV cache thrashing), and one whose window past the top reads a little low
    (noise, or a gentle fall): only the first is a cliff."""

    def kv_cliff(n: int):
        past = max(0.0, (n - 256) / 256)
        return 1785.0 * min(n, 256) / 256 * max(0.6, 1 - 1.4 * past), {}  # 320: -35%

    level = Level(
        limit=256, cap=1024, best_rate=1785.0, best_limit=256, climbing=False, climbed=True
    )
    for _ in range(concurrency.PROBE_EVERY):
        level = decide(level, full(1785.0))
    assert (level.limit, level.reason) == (320, "probe")
    level = decide(level, full(kv_cliff(320)[0]))
    assert (level.limit, level.reason, level.ceiling) == (256, "cliff", 320)
    history = run_curve(kv_cliff, level, concurrency.CEILING_WINDOWS - 1)
    assert max(lv.limit for lv, _ in history) < 320
    assert sum(rate for _, rate in history) / len(history) >= 0.95 * 1785.0
    probe = replace(level, limit=320, climbing=True, ceiling=None)
    assert decide(probe, full(0.85 * 1785.0)).reason == "plateau"  # no ceiling for that


def test_a_doubling_that_reads_as_much_holds_halfway_and_probes_above_first():
    """64 -> 128 paid, 128 -> 256 read as much as 128 (a level read in a short window reads
    high, and the top is somewhere between): 181 is held, and its first probe goes above it.
    A doubling that read clearly less goes back to the level below, as any step that lost."""
    level = decide(decide(concurrency.start(cap=1024), full(100.0)), full(200.0))  # 16, 32
    level = decide(decide(level, full(400.0)), full(700.0))  # 64 -> 128: +75%, doubles
    assert (level.limit, level.step) == (256, 2.0)
    halfway = decide(level, full(705.0))
    assert (halfway.limit, halfway.reason, halfway.probe_down) == (182, "plateau", False)
    for _ in range(concurrency.PROBE_EVERY):
        halfway = decide(halfway, full(720.0))
    assert halfway.limit > 182 and halfway.reason == "probe", halfway
    lost = decide(level, full(600.0))
    assert (lost.limit, lost.reason) == (128, "plateau")


def test_a_probe_below_kept_by_a_small_margin_probes_above_next_not_lower_still():
    """Back at 32 from a cliff at 64 (one noisy window on a CPU engine can read one), a probe
    below that pays 3% more (noise) is kept, but the next probe goes above it: the real vLLM
    CPU server was walked 32 -> 25 -> 20 -> 16 by such windows. One that pays clearly more
    (past a real cliff) walks on down."""
    level = Level(limit=64, cap=1024, best_rate=236.0, best_limit=32, climbing=True, climbed=True)
    back = decide(level, full(160.0))
    assert (back.limit, back.reason, back.probe_down) == (32, "cliff", True)
    below = decide(back, full(236.0))
    assert (below.limit, below.reason) == (25, "probe below")
    kept = decide(below, full(236.0 * 1.03))
    assert (kept.limit, kept.reason, kept.probe_down) == (25, "lower pays as much", False)
    held = kept
    for _ in range(concurrency.PROBE_EVERY):
        held = decide(held, full(243.0))
    assert held.limit > 25 and held.reason == "probe", held
    clearly = decide(below, full(236.0 * 1.2))
    assert clearly.probe_down
    on = decide(clearly, full(283.0))
    assert (on.limit, on.reason) == (20, "probe below")


def test_a_cliff_read_while_almost_no_request_ended_is_read_again_once():
    """The real vLLM CPU server, 32 -> 64: a 1.8-s window right after the step read 128
    tok/s against 303 (the CPU prefilling 32 new prompts), and 2 requests ended in it. Such
    a cliff is read again; read twice, or read over many requests ending, it is one."""
    climbing = Level(limit=64, cap=1024, best_rate=303.0, best_limit=32, climbed=True)
    doubted = decide(climbing, full(128.0, requests=2))
    assert (doubted.limit, doubted.reason) == (64, "a cliff? read again")
    assert decide(doubted, full(128.0, requests=2)).reason == "cliff"
    assert decide(doubted, full(330.0, requests=30)).limit > 64  # it was the prefill
    assert decide(climbing, full(128.0, requests=30)).reason == "cliff"
