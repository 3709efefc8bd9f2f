"""The line of requests waiting for a slot on some server, and whom a freed slot wakes.

Each waiter is noted with the server its prefix prefers (None: any), so that with
cache-affine dispatch a slot freed there goes to a request whose prefix it holds; the rest
are woken in order. A waiter also wakes on its own every second, to re-check health and
whether to give up: a wake-up is a hint to look again, never a slot handed over.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from regen.fleet.server import Server

AFFINE_SCAN = 256  # waiters looked through for one whose prefix a freed server holds
RECHECK = 1.0  # seconds a waiter sleeps at most before it looks again


class WaitingLine:
    def __init__(self, affine: bool) -> None:
        self.affine = affine
        self._waiters: deque[tuple[asyncio.Future, Server | None]] = deque()
        self.waiting = 0  # requests waiting for a slot, woken or not, until they look again

    def __len__(self) -> int:
        return len(self._waiters)

    async def wait(self, prefers: Server | None) -> None:
        """Until woken, or RECHECK seconds."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((waiter, prefers))
        self.waiting += 1  # till it runs again, woken or not: no copy takes its slot
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter, timeout=RECHECK)
        finally:
            self.waiting -= 1

    def wake(self, count: int, freed: Server | None = None) -> None:
        """Wake `count` waiters, first one whose prefix prefers the server just `freed`
        (looked for among the first AFFINE_SCAN), then in order."""
        if freed is not None and self.affine and count:
            for i, (waiter, prefers) in enumerate(self._waiters):
                if i >= AFFINE_SCAN:
                    break
                if prefers is freed and not waiter.done():
                    del self._waiters[i]
                    waiter.set_result(None)
                    count -= 1
                    break
        while self._waiters and count:
            waiter, _ = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                count -= 1

    def wake_all(self) -> None:
        self.wake(len(self._waiters))
