"""One (prompt, sample) to one line in completions/ or errors/: the run's unit of work.

Nothing raised for one record stops the run; only a fleet, tool server or output fault does
(`fail`). A request that never left (the run is stopping) is not recorded: the next run
sends it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from regen.errors import ConfigError, FleetUnavailable, OutputError, RegenError, ServerError
from regen.fleet.dispatch import DispatchHalted, Fleet
from regen.records import WorkItem
from regen.run.conversation import RequestShape, completion_record, regenerate
from regen.run.progress import RunStats
from regen.run.recorder import Recorder
from regen.run.sampling import Sampling
from regen.run.tool_prompts import ToolGate
from regen.run.tool_server import ToolServer
from regen.storage import Store
from regen.storage.lease import LeaseLost

log = logging.getLogger("regen.run")


class ItemWorker:
    def __init__(
        self,
        fleet: Fleet,
        store: Store,
        recorder: Recorder,
        stats: RunStats,
        sampling: Sampling,
        shape: RequestShape,
        tool_server: ToolServer | None,
        fail: Callable[[RegenError], None],
        tool_gate: ToolGate | None = None,
    ) -> None:
        self.fleet, self.store, self.recorder, self.stats = fleet, store, recorder, stats
        self.sampling, self.shape, self.tool_server = sampling, shape, tool_server
        self.fail, self.tool_gate = fail, tool_gate

    async def process(self, item: WorkItem) -> None:
        self.fleet.endgame.near_end(self.stats.remaining)
        try:
            await self.store.room()  # a bucket that cannot keep up pauses requests, not writes
            sampling = self.sampling.for_item(item).with_overrides(item.prompt.sampling)
            if item.prompt.tools and self.tool_gate is not None:
                try:
                    await self.tool_gate.check(item.prompt.line)
                except ConfigError as err:  # the fleet cannot answer tools: none is sent
                    self.fail(err)
                    return
            try:
                conv = await regenerate(self.fleet, item, self.shape, sampling, self.tool_server)
            except ServerError as err:
                self._record_failure(item, err.to_record(), err.attempts, err.kind)
                return
            record = completion_record(item, conv, self.shape, sampling)
            assert conv.last is not None
            self.recorder.completion(record, conv.last)
        except DispatchHalted:
            return  # never sent: the next run sends it
        except (FleetUnavailable, OutputError, LeaseLost) as err:
            self.fail(err)
        except Exception as exc:  # a bug on one record: record it, keep its traceback in the log
            log.exception("prompt %s (line %d) failed", item.prompt.id, item.prompt.line)
            message = f"{type(exc).__name__}: {exc}"[:500]
            self._record_failure(item, {"type": "internal_error", "message": message}, 0)

    def _record_failure(self, item: WorkItem, error: dict, attempts: int, kind: str = "") -> None:
        try:
            self.recorder.failure(item, error, attempts, kind)
        except OutputError as err:
            self.fail(err)
