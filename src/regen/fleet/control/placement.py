"""Near the end of a run, the last items go where they finish first, not where a slot is
free: a slower server's free slot is passed over while the faster servers would get through
what is left sooner, even after waiting for a slot of theirs (endgame.py says when)."""

from __future__ import annotations

from regen.fleet.control.forecast import Forecast
from regen.fleet.server import Server

SLOWER = 0.8  # a server is slower than another below this share of its token rate


class Placement:
    def __init__(self) -> None:
        self._decline_below: dict[Server, float] = {}

    def refresh(self, servers: list[Server]) -> None:
        """Below how many unsent items each server's free slot is passed over: when the
        faster servers get through them in less time than this one needs, beyond what they
        need, for one request (the fluid picture; the request's length cancels out)."""
        rates = {s: r for s in servers if s.available and (r := Forecast.rate(s))}
        self._decline_below = {}
        for server, mine in rates.items():
            faster = [(s, r) for s, r in rates.items() if r * SLOWER > mine]
            if faster:
                best = max(r for _, r in faster)
                tokens_per_s = sum(s.limit * r for s, r in faster)
                self._decline_below[server] = (1 / mine - 1 / best) * tokens_per_s

    def declines(self, server: Server, unsent: int) -> bool:
        """Whether `server`'s free slot is passed over with `unsent` items left to send. (A
        count that says none is unsent is off, as a part's estimate may be: no effect.)"""
        return 0 < unsent < self._decline_below.get(server, 0.0)
