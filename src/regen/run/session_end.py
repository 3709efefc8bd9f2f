"""What a session leaves when it ends, and the tasks that watch it while it runs.

The manifest keeps what outlives progress.json: the level each server ran at (where the next
session starts) and the input's count, if this session made one. The watchers (the progress
snapshot, the fleet's health, the live concurrency, the embedded server) run beside the
dispatch and are cancelled with it, however it ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from regen.fleet.server import Server
from regen.format.manifest import record_session_end
from regen.format.part import Part
from regen.run.counts import session_count
from regen.run.progress import RunStats, concurrency_of


def session_end(
    stats: RunStats, servers: list[Server], part: Part, input_digest: str
) -> dict[str, Any]:
    return {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "state": str(stats.state),
        "completed": stats.completed,
        "servers": [{"url": s.url, **concurrency_of(s)} for s in servers],
        "counted": session_count(stats, part, input_digest),
    }


def record_end(
    manifest: Path, session: dict[str, Any], ended: dict[str, Any], on_event: Callable[[str], None]
) -> None:
    try:
        record_session_end(manifest, session, ended)
    except OSError as exc:  # the run's records are safe; only this summary is missing
        on_event(f"could not record the session's end in the manifest: {exc}")


@asynccontextmanager
async def running(watchers: list[Coroutine[Any, Any, Any]]) -> AsyncIterator[None]:
    """Each watcher as a task for the time of the block; all cancelled and awaited after."""
    tasks = [asyncio.create_task(w) for w in watchers]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
