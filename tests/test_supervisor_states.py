"""The server watch's states and their transitions are written down once and enforced."""

from __future__ import annotations

from pathlib import Path

import pytest

from regen.serve.process import LaunchSpec, ServerProcess
from regen.serve.supervisor import TRANSITIONS, ChangeKind, WatchState, _Watch


def watch() -> _Watch:
    spec = LaunchSpec("server-0", ["true"], {}, 1, Path("server-0.log"), "m")
    return _Watch(ServerProcess(spec, tied_to_parent=False))


def test_every_state_has_its_transitions_and_dead_is_final():
    assert set(TRANSITIONS) == set(WatchState)
    assert TRANSITIONS[WatchState.DEAD] == frozenset()


def test_the_restart_cycle_is_allowed():
    w = watch()
    for state in (WatchState.WAITING, WatchState.STARTING, WatchState.READY, WatchState.DEAD):
        w.move(state)
    assert w.state is WatchState.DEAD


def test_a_move_off_the_arrows_is_refused():
    w = watch()
    w.move(WatchState.DEAD)
    with pytest.raises(AssertionError, match="cannot go from dead to ready"):
        w.move(WatchState.READY)
    with pytest.raises(AssertionError):
        watch().move(WatchState.STARTING)  # ready -> starting skips the wait


def test_states_and_change_kinds_read_as_their_old_strings():
    assert WatchState.READY == "ready" and ChangeKind.RESTARTED == "restarted"
