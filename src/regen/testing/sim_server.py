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


@dataclass(eq=False)
class SimServer(Server):
    """A Server whose engine is a Scheduler in the same process: /metrics read directly."""

    scheduler: Scheduler = field(default_factory=Scheduler)

    async def get_text(self, path: str, timeout: float = 5.0) -> str:
        if not self.scheduler.curve.metrics:
            raise PermanentError("HTTP 404", server=self.name)
        return metrics_text("vllm", self.scheduler, "fake-model")


class SimWaiting(WaitingStreams):
    """A server's streams without a first event, withdrawn as regen's are (waiting_streams.py)."""

    def __init__(self, withdraw: Callable[[int], int]) -> None:
        super().__init__()
        self._withdraw = withdraw

    def withdraw(self, count: int) -> int:
        return self._withdraw(count)
