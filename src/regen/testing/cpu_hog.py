"""A busy client machine on demand: processes that keep cores busy while a test or a bench
runs beside them, so that what regen decides from its own measurements (live concurrency
above all) is tried on a loaded machine, as a busy CI or a client doing its job is."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

# Each hog spins until it is stopped, its parent is gone (a killed test run) or a deadline.
SPIN = (
    "import os, time\nend = time.monotonic() + {seconds}\n"
    "while time.monotonic() < end and os.getppid() == {parent}:\n    pass"
)


@contextmanager
def cpu_hogs(processes: int, seconds: float = 1800.0) -> Iterator[list[int]]:
    """`processes` busy processes for the body's time (each ends by itself after `seconds`);
    yields their pids, and stops each by its pid on the way out."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=seconds, parent=os.getpid())])
        for _ in range(processes)
    ]
    try:
        yield [hog.pid for hog in hogs]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(timeout=10)
