"""Pending work items to requests in flight: at most `capacity` at a time, none new once the
run is stopping, and at the end a drain of what is still in flight."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator

from regen.errors import RegenError
from regen.records import WorkItem
from regen.run.stop import Stop

log = logging.getLogger("regen.run")


class Dispatcher:
    def __init__(
        self,
        capacity: int,
        stop: Stop,
        process: Callable[[WorkItem], Awaitable[None]],
        fail: Callable[[RegenError], None],
    ) -> None:
        self._slots = asyncio.Semaphore(capacity)
        self._stop, self._process, self._fail = stop, process, fail
        self._tasks: set[asyncio.Task] = set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def send(self, items: Iterator[WorkItem | None]) -> bool:
        """Start a request for each item as slots free up; True if every item was taken
        (False: the run is stopping, or the input broke off, which `fail` was told)."""
        try:
            for n, item in enumerate(items):
                if item is None or n % 1000 == 0:
                    await asyncio.sleep(0)  # let finished requests be written meanwhile
                if item is None:
                    continue
                if not await self._free_slot():
                    return False
                task = asyncio.create_task(self._process(item))
                self._tasks.add(task)
                task.add_done_callback(self._done)
        except RegenError as err:  # the input broke off, or recording a bad line failed
            self._fail(err)
            return False
        return True

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:  # a bug in `process`
            exc = task.exception()
            log.error("a request task failed", exc_info=exc)
            self._fail(RegenError(f"internal error: {type(exc).__name__}: {exc}"))

    async def _free_slot(self) -> bool:
        """Wait for a free request slot, or for the stop (when every server is down, no slot
        frees up, and a SIGTERM must still be seen). True if a slot was taken."""
        if self._stop:
            return False
        if not self._slots.locked():
            await self._slots.acquire()
            return True
        acquire = asyncio.ensure_future(self._slots.acquire())
        stopped = asyncio.ensure_future(self._stop.event.wait())
        await asyncio.wait({acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        acquire.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await acquire
        taken = not acquire.cancelled()
        if taken and self._stop:
            self._slots.release()
            return False
        return taken

    async def drain(self, timeout: float, draining: Callable[[int], None]) -> None:
        """Wait for what is in flight: all of it normally, up to `timeout` once stopping (a
        signal may arrive while we wait, so keep looking). `draining(n)` is told when the
        stop cuts the wait short."""
        while self._tasks and not self._stop:
            await asyncio.wait(set(self._tasks), timeout=0.5)
        if not self._tasks:
            return
        draining(len(self._tasks))
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()  # not written: the next run redoes exactly these
        await asyncio.gather(*pending, return_exceptions=True)
