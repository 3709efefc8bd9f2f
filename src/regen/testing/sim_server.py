"""A simulated fleet's server (sim_fleet.py): regen's own Server, its engine a Scheduler in
the same process (its /metrics read directly), its waiting streams withdrawn by the fleet."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from regen.errors import PermanentError
from regen.fleet.server import Server
from regen.fleet.waiting_streams import WaitingStreams
from regen.testing.fake_metrics import metrics_text
from regen.testing.fake_scheduler import Scheduler


class SimWaiting(WaitingStreams):
    """A server's streams without a first event, counted and withdrawn by the fleet (regen's
    own are tracked by the Server as it reads them: waiting_streams.py)."""

    def __init__(self, withdraw: Callable[[int], int]) -> None:
        super().__init__()
        self._withdraw = withdraw
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def count(self, change: int) -> None:
        self._count += change

    def withdraw(self, count: int) -> int:
        return self._withdraw(count)


@dataclass(eq=False)
class SimServer(Server):
    """A Server whose engine is a Scheduler in the same process: /metrics read directly."""

    scheduler: Scheduler = field(default_factory=Scheduler)
    # also its `waiting`, once the fleet has given it a way to withdraw (SimFleet)
    streams: SimWaiting = field(default_factory=lambda: SimWaiting(lambda count: 0))

    async def get_text(self, path: str, timeout: float = 5.0) -> str:
        if not self.scheduler.curve.metrics:
            raise PermanentError("HTTP 404", server=self.name)
        return metrics_text("vllm", self.scheduler, "fake-model")
