"""Append-only shard writers: the output files are the run's ledger.

Each process writes its own shards (`part-<start>-<host>-<pid>-<seq>.jsonl`) and never
touches another's, so several client processes or machines can share one output dir. Every
record is one `os.write` of a whole line, so a killed process leaves at most one torn line,
which the next run cuts off (see `ledger`). A full shard is sealed: optionally compressed to
`.jsonl.zst` (written aside, then renamed), and given a `.keys` sidecar that lets the next
resume read its keys without parsing it. The sidecar is only a cache: it names the shard's
size, and a sidecar that does not match its shard is ignored and rebuilt.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import orjson
import zstandard

from regen.jsonio import ZST_SUFFIX, atomic_write_bytes, dumps_line

SIDECAR_SUFFIX = ".keys"


def writer_tag() -> str:
    """Unique per writing session, sortable by start time. The random part keeps two sessions
    of one process (library use) from sharing a name: in a bucket, a name is overwritten."""
    host = socket.gethostname().split(".")[0].replace("-", "_") or "host"
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return f"{stamp}-{host}-{os.getpid()}{os.urandom(3).hex()}"


class ShardWriter:
    def __init__(
        self,
        folder: Path,
        tag: str,
        *,
        max_records: int = 20_000,
        compress: bool = False,
        fsync_interval: float = 2.0,
        max_bytes: int | None = None,
        max_age: float | None = None,
    ) -> None:
        self.folder = folder
        self.tag = tag
        self.max_records = max_records
        self.compress = compress
        self.fsync_interval = fsync_interval
        # By size and by age, so that an upload behind the writer sees sealed shards often.
        self.max_bytes, self.max_age = max_bytes, max_age
        self._bytes, self._opened = 0, 0.0
        self._seq = 0
        self._fd: int | None = None
        self._path: Path | None = None
        self._keys: list[tuple[str, int | None]] = []
        self._last_sync = time.monotonic()
        folder.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict) -> None:
        """Append one record (it must start with `id` and `sample`)."""
        if self._fd is None:
            self._open()
        assert self._fd is not None
        line = dumps_line(record)
        written = os.write(self._fd, line)
        if written != len(line):  # only on a full disk; the short tail is cut on restart
            raise OSError(f"short write to {self._path}: {written} of {len(line)} bytes")
        self._keys.append((record["id"], record.get("sample")))
        self._bytes += written
        now = time.monotonic()
        if now - self._last_sync >= self.fsync_interval:
            os.fsync(self._fd)
            self._last_sync = now
        full = self.max_bytes is not None and self._bytes >= self.max_bytes
        if len(self._keys) >= self.max_records or full:
            self.seal()
        else:
            self.tick()

    def tick(self) -> None:
        """Seal the open shard if it is older than `max_age` (called now and then)."""
        if self._fd is None or self.max_age is None:
            return
        if time.monotonic() - self._opened >= self.max_age:
            self.seal()

    def seal(self) -> None:
        """Close the current shard for good; the next write starts a new one."""
        if self._fd is None or self._path is None:
            return
        os.fsync(self._fd)
        os.close(self._fd)
        seal_shard(self._path, self._keys, self.compress)
        self._fd, self._path, self._keys = None, None, []

    close = seal

    def _open(self) -> None:
        self._seq += 1
        self._path = self.folder / f"part-{self.tag}-{self._seq:05d}.jsonl"
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._bytes, self._opened = 0, time.monotonic()


def seal_shard(path: Path, keys: list[tuple[str, int | None]], compress: bool) -> Path:
    """Compress (if asked) and write the keys sidecar; returns the sealed shard's path."""
    final = path
    if compress and not path.name.endswith(ZST_SUFFIX):
        final = path.with_name(path.name + ZST_SUFFIX)
        tmp = final.with_name("." + final.name + ".tmp")
        with open(path, "rb") as src, open(tmp, "wb") as dst:
            zstandard.ZstdCompressor(level=3).copy_stream(src, dst)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, final)
        path.unlink()
    write_sidecar(final, keys)
    return final


def sidecar_path(shard: Path) -> Path:
    return shard.with_name(shard.name + SIDECAR_SUFFIX)


def write_sidecar(shard: Path, keys: list[tuple[str, int | None]]) -> None:
    payload = {"shard": shard.name, "bytes": shard.stat().st_size, "keys": keys}
    atomic_write_bytes(sidecar_path(shard), orjson.dumps(payload))


def read_sidecar(shard: Path) -> list[tuple[str, int | None]] | None:
    """The sidecar's keys if it exists and still matches the shard, else None."""
    side = sidecar_path(shard)
    if not side.exists():
        return None
    try:
        payload = orjson.loads(side.read_bytes())
    except orjson.JSONDecodeError:
        return None
    if payload.get("shard") != shard.name or payload.get("bytes") != shard.stat().st_size:
        return None
    return [(k[0], k[1]) for k in payload["keys"]]
