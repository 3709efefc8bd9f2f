"""A simulated fleet's small parts (sim_fleet.py): its clock, a busy client, a request sent
and the events its stream has brought, and what a run comes to."""

from __future__ import annotations

from dataclasses import dataclass

from regen.testing.fake_scheduler import Job
from regen.testing.sim_server import SimServer

EVENTS = 64  # stream events an answer (the fakes': its text in 7-character pieces)


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Busy:
    """A busy client: its loop wakes up to `lag` s late (the controller's samples with it),
    and it sends at most `sends_per_s` requests a second."""

    lag: float = 0.0
    sends_per_s: float = float("inf")


@dataclass(eq=False)
class Sent:
    job: Job
    prompt: int
    server: SimServer
    at: float
    fault: str
    tokens: int
    events: int = 0
    flight: bool = False  # sent once the end game was armed: a copy may race it
    copy_of: Sent | None = None  # this is the end game's copy of that request
    copy: Sent | None = None  # the copy racing this request, while it runs


@dataclass
class Result:
    rate: float  # tokens of whole answers a second, from the first send to the last answer
    seconds: float
    answered: int  # distinct prompts answered
    answers: int  # answers stored (more than `answered`: some answered twice)
    levels: list[int]  # each server's level at the end
    peaks: list[int]  # each server's most requests in flight


def stream_events(sent: Sent) -> None:
    """The events a paced stream has sent by now (a faulty one sends nothing until its
    engine is done, then half its answer: fake_stream.send_stream)."""
    job = sent.job
    if sent.fault != "ok" and job.generated < job.wanted:
        return
    share = 0.5 if sent.fault != "ok" else 1.0
    due = min(EVENTS - 1, int(EVENTS * share * job.generated // job.wanted))
    if due > sent.events:
        if sent.events == 0:
            sent.server.streams.count(-1)
        sent.server.stats.streamed_events += due - sent.events
        sent.events = due
