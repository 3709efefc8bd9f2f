"""A failure seen outside a request's own retries (an end-game copy's) counts on its server
as any failed attempt does (fleet/roster.py), and a wrong-shaped answer is not a failure."""

from __future__ import annotations

import pytest

from regen.errors import FleetUnavailable, PermanentError, ServerFault, ServerRefused
from regen.fleet.policy import HealthPolicy
from regen.fleet.roster import Roster
from regen.fleet.server import Server
from regen.fleet.slots import WaitingLine


def roster(*urls: str) -> tuple[Roster, list[str]]:
    events: list[str] = []
    servers = [Server(url, concurrency=4) for url in urls]
    return Roster(servers, HealthPolicy(), events.append, WaitingLine(False), 0.0), events


def test_failed_copies_in_a_row_take_their_server_out():
    fleet, events = roster("http://127.0.0.1:9", "http://127.0.0.1:10")
    bad, good = fleet.servers
    for _ in range(bad.breaker.threshold):
        fleet.record_error(bad, ServerFault("502", server=bad.name))
    assert not bad.available and good.available
    assert any("taken out of rotation" in e and bad.name in e for e in events)
    fleet.check_give_up()  # one server still serves: the run goes on


def test_a_server_refusing_every_copy_is_retired_and_the_last_one_stops_the_run():
    fleet, _ = roster("http://127.0.0.1:9")
    (only,) = fleet.servers
    for _ in range(only.refusals.threshold):
        fleet.record_error(only, ServerRefused("404 page not found", server=only.name))
    assert fleet.is_retired(only)
    with pytest.raises(FleetUnavailable, match="refuses every request"):
        fleet.check_give_up()


def test_a_permanent_error_counts_against_no_server():
    fleet, events = roster("http://127.0.0.1:9")
    (only,) = fleet.servers
    for _ in range(10):
        fleet.record_error(only, PermanentError("400 bad request", server=only.name))
    assert only.available and not fleet.is_retired(only) and events == []
