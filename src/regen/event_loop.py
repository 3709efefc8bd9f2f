"""The event loop regen's async work runs on: uvloop where it is installed, else asyncio's.

A streamed answer costs its client one wakeup an event (the socket's read, the HTTP parser,
the task resumed), and with 8,192 answers of one token an event that wakeup is most of the
client's CPU. uvloop (libuv under asyncio's API) does the same wakeup for less: see
BENCHMARKS.md, "At the scale of a seeds run". It is a dependency on Linux and macOS; on
Windows, or where it fails to import, asyncio's own loop runs the same code unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop maker, or None for asyncio's default."""
    try:
        import uvloop
    except ImportError:  # not installed (Windows has no build): asyncio's loop is as correct
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop above."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
