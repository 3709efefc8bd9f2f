"""Serve an aiohttp app from an event loop in a background thread, so that a test's main
thread can run regen against it. Stopping cuts whatever is still in flight, like a killed
server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable


class LoopThread:
    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(
        self, setup: Callable[[], Awaitable[None]], teardown: Callable[[], Awaitable[None]]
    ) -> None:
        """Run `setup` in the new loop and return once it is done; `teardown` runs on stop."""
        ready = threading.Event()

        def serve() -> None:
            loop = self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            loop.run_until_complete(setup())
            ready.set()
            loop.run_forever()
            pending = asyncio.all_tasks(loop)  # handlers still hanging: cut them first,
            for task in pending:  # or the teardown would wait for them
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(teardown())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True, name=self.name)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self.name} did not start")

    def stop(self) -> None:
        if self.loop is not None and self._thread is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
            self.loop = None
