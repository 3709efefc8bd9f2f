"""One run per output directory at a time.

An exclusive `flock` on `run.lock`: the kernel drops it when the holder dies, even by
kill -9, so a stale lock never blocks the next run. The file also says who holds it (pid,
host, start), for `regen status` and for the refusal message.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

import orjson

from regen.errors import OutputError, RunStateError


class RunLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # a read-only or full output dir: say which and what to do
            raise OutputError.writing(self.path.parent, exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = read_holder(self.path) or {}
            raise RunStateError(
                f"{self.path.parent} is in use by another regen generate "
                f"(pid {holder.get('pid', '?')} on {holder.get('host', '?')}, "
                f"since {holder.get('started', '?')})",
                hint=f"watch it with `regen status {self.path.parent}`, or stop it first",
            ) from None
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": _now()}
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, orjson.dumps(info), 0)
        except OSError as exc:  # a full disk
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            self._fd = None
            raise OutputError.writing(self.path.parent, exc) from exc

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def read_holder(path: Path) -> dict | None:
    try:
        data = path.read_bytes()
        return orjson.loads(data) if data.strip() else None
    except (OSError, orjson.JSONDecodeError):
        return None


def is_locked(path: Path) -> bool:
    """True while some process holds the run lock (works from any shell on this machine)."""
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
