"""The end game's copies of stalled streams, in virtual time (sim_fleet.py; the client's
own: fleet/control/endgame.py). A request sent once the end game is armed (EndGame.near_end,
the client's own arithmetic) is a flight; once every prompt is sent, a flight whose stream
has been silent SILENT_READS of its longest read pauses is copied to the fastest other server
with a free slot (no budget: as regen's, for a stalled stream); whichever answers first is
the answer, the other is dropped. Not modelled: the copies of requests that are only slow."""

from __future__ import annotations

import itertools

from regen.fleet.control.endgame import SILENCE_CHECK_S, EndGame
from regen.fleet.control.forecast import Forecast, stalled_after
from regen.testing.sim_parts import Sent
from regen.testing.sim_server import SimServer

__all__ = ["SILENCE_CHECK_S", "SimEndGame"]


class SimEndGame:
    def __init__(self, servers: list[SimServer], stall_timeout: float) -> None:
        self.servers = servers
        self._arming = EndGame(servers, release=lambda s: None, copy_failed=lambda s, e: None)
        self.silent_after = stalled_after(stall_timeout)
        self.stalls: dict[int, Sent] = {}  # a stalled stream, until it is cut
        self._keys = itertools.count()

    def watch(self, stalled: Sent) -> int:
        """The key of a stalled stream's events (its cut, its silence looked at)."""
        self.stalls[key := next(self._keys)] = stalled
        return key

    def flight(self, left: int) -> bool:
        """Whether a request sent with `left` prompts unanswered is a flight."""
        self._arming.near_end(left)
        return self._arming.armed

    def copy_to(self, stalled: SimServer, now: float) -> SimServer | None:
        """The server a stalled flight's copy goes to (None: none has room)."""
        rated = [
            (rate, i)
            for i, s in enumerate(self.servers)
            if s is not stalled and s.can_take(now) and (rate := Forecast.rate(s))
        ]
        if not rated:
            return None
        return self.servers[max(rated)[1]]
