"""A run in a plain local directory: the files are already where they belong. The run lock
(`lock`) says whether a process works on it; another machine's run on a shared filesystem
is known by its heartbeat."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from regen.format.layout import (
    COMPLETIONS,
    OutputLayout,
    is_progress,
    iter_shard,
    iter_shard_lines,
    iter_shard_numbered,
)
from regen.format.names import written_by
from regen.format.sidecar import read_sidecar, sidecar_path
from regen.format.state import heartbeat_stale, is_final
from regen.jsonio import read_json
from regen.output_place import make_folder
from regen.storage.lock import RunLock, is_locked, read_holder
from regen.storage.store import Liveness, Store, StoreOptions


class LocalStore(Store):
    noun = "output dir"

    def __init__(self, output_dir: str | Path, options: StoreOptions | None = None) -> None:
        self.options = options or StoreOptions()
        self.layout = OutputLayout.at(output_dir, self.options.part.name)
        # messages name the directory as the user typed it (`work/run`), not this machine's
        # absolute path, so that what a README shows is what anyone's run prints
        self.given = str(output_dir)
        self._lock = RunLock(self.layout.lock)

    @property
    def where(self) -> str:
        return self.given

    # -- reading -------------------------------------------------------------------------
    def read_json(self, name: str) -> Any:
        path = self.layout.root / name
        return read_json(path) if path.is_file() else None

    def part_progress(self) -> dict[str, dict]:
        if not self.layout.root.is_dir():
            return {}
        found = sorted(p for p in self.layout.root.glob("progress-*.json") if is_progress(p.name))
        return {p.name: read_json(p) for p in found}

    def shard_names(self, kind: str) -> list[str]:
        return [p.name for p in self.layout.shard_files(kind)]

    def iter_records(self, kind: str = COMPLETIONS) -> Iterator[dict]:
        return self.layout.iter_records(kind)

    def iter_lines(self, kind: str = COMPLETIONS) -> Iterator[bytes]:
        for path in self.layout.shard_files(kind):
            yield from iter_shard_lines(path)

    def iter_numbered_lines(self, kind: str = COMPLETIONS) -> Iterator[tuple[str, int, bytes]]:
        for path in self.layout.shard_files(kind):
            shard = f"{self.given.rstrip('/')}/{kind}/{path.name}"
            for number, line in iter_shard_numbered(path):
                yield shard, number, line

    def count(self, kind: str) -> int:
        """Records in the shards of `kind` (sidecars make sealed shards cheap to count). In a
        shard without one (open, or edited since), a line is a record if it is whole and is a
        JSON object, as the ledger reads it: a corrupt line is no item."""
        total = 0
        for shard in self.layout.shard_files(kind):
            keys = read_sidecar(shard)
            if keys is not None:
                total += len(keys)
            else:
                total += sum(1 for line in iter_shard_lines(shard) if _is_record(line))
        return total

    def liveness(self, progress: dict | None) -> Liveness:
        holder = read_holder(self.layout.lock) or {}
        age = time.time() - progress["updated_unix"] if progress else None
        if progress and progress.get("host") not in (None, socket.gethostname()):
            # Another machine: only the heartbeat can tell.
            alive = not heartbeat_stale(age) and not is_final(progress.get("state"))
            how = f"heartbeat {age:.0f}s ago from {progress['host']}"
        else:
            alive = is_locked(self.layout.lock)
            how = "holds the run lock" if alive else "no process holds the run lock"
        return {
            "alive": alive,
            "pid": holder.get("pid") or (progress or {}).get("pid"),
            "host": holder.get("host") or (progress or {}).get("host"),
            "how": how,
            "last_update_s_ago": None if age is None else round(age, 1),
            "state": (progress or {}).get("state"),
        }

    # -- writing -------------------------------------------------------------------------
    def __enter__(self) -> LocalStore:
        make_folder(self.layout.root, "--output-dir")  # a file or a device there: refused
        self._lock.acquire()
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._lock.release()

    def set_errors_aside(self) -> int:
        return set_aside_local(self.layout, self.options)


def set_aside_local(layout: OutputLayout, options: StoreOptions) -> int:
    """Move this part's error shards (and their sidecars) to errors-retried/. With --shard,
    only this part's: the others are other processes' to retry."""
    part = options.part
    shards = [
        shard
        for shard in layout.shard_files("errors")
        if written_by(shard.name, part, lambda shard=shard: iter_shard(shard))
    ]
    if shards:
        layout.retried_errors.mkdir(exist_ok=True)
    for shard in shards:
        os.replace(shard, layout.retried_errors / shard.name)
        sidecar = sidecar_path(shard)
        if sidecar.exists():
            os.replace(sidecar, layout.retried_errors / sidecar.name)
    return len(shards)


def _is_record(line: bytes) -> bool:
    try:
        return isinstance(orjson.loads(line), dict)
    except orjson.JSONDecodeError:
        return False
