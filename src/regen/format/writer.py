"""Append-only shard writers: the output files are the run's ledger.

Each process writes its own shards (`part-<start>-<host>-<pid>-<seq>.jsonl`) and never
touches another's, so several client processes or machines can share one output dir. Every
record is one `os.write` of a whole line, so a killed process leaves at most one torn line,
which the next run cuts off (see `ledger`). A full shard is sealed: optionally compressed to
`.jsonl.zst` (written aside, then renamed), and given a `.keys` sidecar (`regen.format.sidecar`)
that lets the next resume read its keys without parsing it.

How shards are named: `regen.format.names`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import zstandard

from regen.format.sidecar import Entry, ShardKeys, write_sidecar
from regen.jsonio import ZST_SUFFIX
from regen.records import Record, encode_line


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
        self._keys: list[Entry] = []
        self._last_sync = time.monotonic()
        folder.mkdir(parents=True, exist_ok=True)

    def write(self, record: Record, line: int) -> None:
        """Append one record made from input `line`."""
        if self._fd is None:
            self._open()
        assert self._fd is not None
        data = encode_line(record)
        written = os.write(self._fd, data)
        if written != len(data):  # only on a full disk; the short tail is cut on restart
            raise OSError(f"short write to {self._path}: {written} of {len(data)} bytes")
        self._keys.append((record.id, record.sample, line))
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
        seal_shard(self._path, ShardKeys.of(self._keys), self.compress)
        self._fd, self._path, self._keys = None, None, []

    close = seal

    def _open(self) -> None:
        self._seq += 1
        self._path = self.folder / f"part-{self.tag}-{self._seq:05d}.jsonl"
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._bytes, self._opened = 0, time.monotonic()


def seal_shard(path: Path, keys: ShardKeys, compress: bool) -> Path:
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
