"""Waiting in tests: `wait_until` a condition holds, `kill_when` it holds.

Tests wait on events (a file written, a request seen, a process gone), never on the clock:
a loaded machine can take seconds for what takes milliseconds on an idle one. Both helpers
poll with a short sleep between looks, give up after `timeout` seconds, and then fail the
test with a message that names what was awaited and the last value seen.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    what: str,
    *,
    interval: float = 0.1,
    alive: subprocess.Popen | None = None,
) -> T:
    """Poll `predicate` until it returns something true, and return that.

    `alive`: a process the condition depends on; if it ends first, fail at once with its
    exit status and whatever it wrote to a pipe, rather than wait out the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if alive is not None and alive.poll() is not None:
            raise AssertionError(f"{_ended(alive)} before {what} (last value: {value!r})")
        if time.monotonic() >= deadline:
            raise AssertionError(f"no {what} within {timeout}s (last value: {value!r})")
        time.sleep(interval)


def kill_when(
    target: subprocess.Popen | int,
    predicate: Callable[[], T],
    timeout: float,
    what: str,
    *,
    sig: int = signal.SIGKILL,
    interval: float = 0.1,
) -> T:
    """Wait until `predicate` holds, then send `sig` to `target` (a process or a pid).

    A process given as a Popen must still be running when the condition comes: if it ends
    first, the test fails (the kill would test nothing). If the condition never comes, it
    is killed all the same, so that a failed test leaves nothing running; after a SIGKILL
    it is reaped before this returns."""
    proc = target if isinstance(target, subprocess.Popen) else None
    try:
        value = wait_until(predicate, timeout, what, interval=interval, alive=proc)
    except BaseException:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        raise
    os.kill(proc.pid if proc is not None else target, sig)
    if proc is not None and sig == signal.SIGKILL:
        proc.wait(timeout=30)
    return value


def _ended(proc: subprocess.Popen) -> str:
    """'process 123 exited with 1' and what it wrote to its pipes, if they are pipes."""
    text = f"process {proc.pid} exited with {proc.returncode}"
    if proc.stdout is None and proc.stderr is None:
        return text
    try:
        out, err = proc.communicate(timeout=10)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        return text  # a pipe already read or closed: the status is what we have
    written = "".join(
        x.decode(errors="replace") if isinstance(x, bytes) else x for x in (out, err) if x
    )
    return f"{text}:\n{written}" if written else text
