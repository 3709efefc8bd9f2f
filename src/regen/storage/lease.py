"""One live writer per part of a bucket run, across machines.

Two processes running the same part against one bucket (a Slurm requeue while the old job
still runs, the same command pasted on a second node) would both generate that part's pending
prompts: duplicates that no later resume can undo. The run lock only covers one machine's
disk, so a bucket run also holds a lease, `leases/<part>.json`: a random token, its holder,
and when it was last renewed (renewed with every progress heartbeat).

At start, a lease another live process renewed within `stale_after` seconds is refused. A
lease left by a dead process of this very host (a kill -9, then the same command again) is
taken at once. Otherwise the lease is written, and read back after `settle` seconds: of two
processes that start together, only the one whose token is still there goes on (object stores
read back what was last written). On each renewal the lease must still be ours: if another
process took it (our heartbeats stopped for longer than `stale_after`, say in a network
partition), the run stops rather than write what the other one is writing.

A Ray task that is run again because its worker died may land on another node before the
dead worker's lease has expired: it waits for that (`wait`) rather than failing again.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

import orjson

from regen.errors import RunStateError
from regen.storage.bucket import Bucket

LEASES = "leases"


class LeaseLost(RunStateError):
    """Another process holds this part's lease now: this one must stop writing."""


@dataclass
class Lease:
    bucket: Bucket
    part: str  # Part.name; "" for the whole input
    stale_after: float = 120.0
    settle: float = 1.0
    wait: bool = False  # wait for a live-looking lease to expire instead of refusing

    def __post_init__(self) -> None:
        self.token = os.urandom(8).hex()
        self.host = socket.gethostname()
        self.pid_space = _pid_namespace()  # containers may share a host name, not pids
        self.name = f"{LEASES}/{self.part or 'whole'}.json"

    def acquire(self) -> None:
        held = self._read()
        deadline = time.monotonic() + self.stale_after + self.settle
        while held is not None and held.get("token") != self.token and self._alive(held):
            if not self.wait or time.monotonic() > deadline:
                raise self._refusal(held)
            time.sleep(min(5.0, self.stale_after / 10))
            held = self._read()
        self._write()
        time.sleep(self.settle)
        held = self._read()
        if held is None or held.get("token") != self.token:
            raise self._refusal(held or {})

    def renew(self) -> None:
        held = self._read()
        if held is not None and held.get("token") != self.token:
            raise LeaseLost(
                f"{self._what()} was taken over by pid {held.get('pid')} on "
                f"{held.get('host')} while this run could not renew its lease",
                hint="this run stops so that the two do not write the same prompts; "
                "what it wrote is kept",
            )
        self._write()

    def release(self) -> None:
        held = self._read()
        if held is not None and held.get("token") == self.token:
            self.bucket.delete(self.name)

    def _alive(self, held: dict) -> bool:
        age = time.time() - float(held.get("renewed", 0))
        if age > self.stale_after:
            return False
        here = held.get("host") == self.host and held.get("pid_space") == self.pid_space
        if here:  # on this machine (and in these pids) we can simply look
            return _pid_alive(int(held.get("pid", 0)))
        return True

    def _refusal(self, held: dict) -> RunStateError:
        age = time.time() - float(held.get("renewed", time.time()))
        wait = max(0.0, self.stale_after - age)
        return RunStateError(
            f"{self._what()} is being run by pid {held.get('pid', '?')} on "
            f"{held.get('host', '?')} (lease renewed {age:.0f}s ago)",
            hint=f"watch it with `regen status {self.bucket.url}`; if that process is gone, "
            f"its lease expires in {wait:.0f}s: run the same command then",
        )

    def _what(self) -> str:
        return f"part {self.part} of {self.bucket.url}" if self.part else self.bucket.url

    def _read(self) -> dict | None:
        data = self.bucket.get_bytes(self.name)
        return None if data is None else orjson.loads(data)

    def _write(self) -> None:
        lease = {
            "token": self.token,
            "host": self.host,
            "pid": os.getpid(),
            "pid_space": self.pid_space,
            "renewed": time.time(),
        }
        self.bucket.put_bytes(self.name, orjson.dumps(lease))


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:  # not Linux: the host name alone
        return ""


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True
