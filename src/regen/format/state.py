"""A run's state, as its progress file (`progress.json`) records it for any reader.

    STARTING -> RUNNING -> DRAINING -> STOPPED
                   |          |
                   +----------+------> FINISHED | STOPPED | CALIBRATED

A run is *final* once it is FINISHED, STOPPED or CALIBRATED (regen plan's sample is in and the
run itself has not started): no process works on it any more, whatever its lock or heartbeat
says. A heartbeat older than `STALE_AFTER_S` from a run that is not final means its process
died (or lost its network) on another machine.
"""

from __future__ import annotations

from enum import StrEnum

from regen.errors import RegenError

STALE_AFTER_S = 60.0  # a heartbeat is written every few seconds (a bucket's every 10)


class RunState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    FINISHED = "finished"
    STOPPED = "stopped"
    CALIBRATED = "calibrated"

    @property
    def final(self) -> bool:
        return self in _FINAL

    def to(self, new: RunState) -> RunState:
        """The next state; a transition not in the table is a bug, not a user error."""
        if new not in _NEXT[self]:
            raise RegenError(f"internal error: a run cannot go from {self} to {new}")
        return new

    @classmethod
    def of(cls, value: str | None) -> RunState | None:
        """A state read from a progress file (None when there is none, or an unknown one
        written by another version)."""
        try:
            return cls(value) if value is not None else None
        except ValueError:
            return None


_FINAL = frozenset({RunState.FINISHED, RunState.STOPPED, RunState.CALIBRATED})
_ENDS = {RunState.FINISHED, RunState.STOPPED, RunState.CALIBRATED}
_NEXT: dict[RunState, set[RunState]] = {
    RunState.STARTING: {RunState.RUNNING, *_ENDS},
    RunState.RUNNING: {RunState.DRAINING, *_ENDS},
    RunState.DRAINING: {RunState.STOPPED},
    RunState.FINISHED: set(),
    RunState.STOPPED: set(),
    RunState.CALIBRATED: set(),
}


def is_final(value: str | None) -> bool:
    """Whether a state read from a progress file is final (an unknown one is not)."""
    state = RunState.of(value)
    return state is not None and state.final


def heartbeat_stale(age_s: float | None) -> bool:
    return age_s is None or age_s >= STALE_AFTER_S
