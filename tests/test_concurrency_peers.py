"""Live concurrency learns from the fleet (peers.py): a level at which a peer's output is
clearly above this server's best is tried here, once, and judged by this server's windows."""

from __future__ import annotations

from dataclasses import replace

from concurrency_helpers import full
from regen.fleet.control import concurrency, peers
from regen.fleet.control.concurrency import Level, decide


def held(limit: int, rate: float, cap: int = 1024) -> Level:
    return Level(
        limit=limit,
        cap=cap,
        best_rate=rate,
        best_limit=limit,
        climbing=False,
        climbed=True,
        first_climb=False,
    )


def test_a_server_held_at_half_what_its_peers_found_tries_their_level_and_keeps_what_pays():
    tried: set[int] = set()
    trial = peers.follow(held(208, 1000.0), [held(1024, 1000.0), held(416, 1500.0)], tried)
    assert (trial.limit, trial.reason, trial.climbing, tried) == (416, "a peer", True, {416})
    kept = decide(trial, full(1450.0))  # its own window: +45% over its 208
    assert kept.limit >= 416 and kept.best_limit == 416
    back = decide(trial, full(990.0))  # not here (another GPU kind): back to its own best
    assert (back.limit, back.climbing) == (208, False)
    assert peers.follow(replace(back, held=1), [held(416, 1500.0)], tried) == replace(back, held=1)


def test_a_lower_level_of_a_peer_is_a_probe_below_kept_only_if_it_pays_as_much():
    tried: set[int] = set()
    trial = peers.follow(held(1024, 1000.0), [held(256, 1200.0)], tried)
    assert (trial.limit, trial.down_from, trial.reason) == (256, 1024, "a peer")
    assert decide(trial, full(1210.0)).limit == 256  # pays more with fewer: kept
    assert decide(trial, full(900.0)).limit == 1024  # the peer's GPU, not its level


def test_nothing_moves_without_a_clear_gain_nor_while_either_side_is_still_finding_its_level():
    assert peers.follow(held(100, 1000.0), [held(200, 1050.0)], set()).limit == 100  # +5%
    climbing = concurrency.start(cap=1024)
    assert peers.follow(climbing, [held(200, 5000.0)], set()) == climbing
    peer_climbing = replace(held(200, 5000.0), climbing=True)
    assert peers.follow(held(100, 1000.0), [peer_climbing], set()).limit == 100
    assert peers.follow(held(100, 1000.0), [held(200, 5000.0)], {200}).limit == 100  # tried
    at_its_cap = held(256, 1000.0, cap=256)  # a peer allowed more: nothing to try here
    assert peers.follow(at_its_cap, [held(512, 2000.0)], set()) == at_its_cap
    under_its_cap = peers.follow(held(128, 1000.0, cap=256), [held(512, 2000.0)], set())
    assert (under_its_cap.limit, under_its_cap.climbing) == (256, True)


def test_a_cliff_a_peer_met_caps_the_climb_of_an_alike_server_not_of_a_slower_one():
    cliff = replace(held(200, 1500.0), ceiling=250, cliff_at=250)  # fell past a cliff at 250
    climbing = replace(held(200, 1480.0), climbing=True, step=1.25)
    capped = peers.shared_ceiling(climbing, [cliff])
    assert capped.ceiling == 250
    assert decide(capped, full(1600.0)).limit < 250  # it climbs, but not to the cliff
    assert decide(climbing, full(1600.0)).limit >= 250  # (without the peer it would)
    slower = replace(climbing, best_rate=700.0)  # half as fast: another GPU, another cache
    assert peers.shared_ceiling(slower, [cliff]) == slower
    lower = replace(climbing, ceiling=220)  # its own ceiling is lower: its own stands
    assert peers.shared_ceiling(lower, [cliff]) == lower
    past = replace(climbing, limit=256)  # already past it: its own window judges that
    assert peers.shared_ceiling(past, [cliff]) == past
    preempted = replace(cliff, cliff_at=0)  # a ceiling set by preemptions: not shared
    assert peers.shared_ceiling(climbing, [preempted]) == climbing


def test_each_way_back_from_a_cliff_marks_its_ceiling_one_to_share():
    climbed = replace(held(200, 1500.0), climbing=True, step=1.25, limit=250)
    assert decide(climbed, full(700.0)).cliff  # a step up that lost half
    fell = replace(held(250, 1500.0), below_limit=200, below_rate=1500.0, held=2)
    assert decide(fell, full(1000.0)).cliff  # a held level fell under the one below
