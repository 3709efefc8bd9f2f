"""Read a run straight from a bucket, for `regen status`, `check` and `export`.

Only committed shards count (see `shards`): a reader never sees a shard whose upload is
still in flight, and never counts a record twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from regen.errors import ConfigError
from regen.run import eta
from regen.run.layout import COMPLETIONS, ERRORS, OutputLayout
from regen.run.manifest import manifest_summary
from regen.scale.status import with_shards
from regen.storage.bucket import Bucket, is_url
from regen.storage.shards import list_kind, read_records, read_sidecars, sidecar_count

STALE_AFTER_S = 60.0  # a heartbeat (uploaded every 10 s) older than this: the writer is gone


class BucketRun:
    def __init__(self, url: str) -> None:
        self.bucket = Bucket(url)
        self.where = self.bucket.url
        self.completions = self.bucket.url_of(COMPLETIONS)

    def shard_files(self, kind: str) -> list[str]:
        return list(list_kind(self.bucket, kind).committed)

    def iter_records(self, kind: str = COMPLETIONS) -> Iterator[dict]:
        for name in self.shard_files(kind):
            yield from read_records(self.bucket, kind, name)

    def count(self, kind: str) -> int:
        names = self.shard_files(kind)
        return sum(sidecar_count(sidecar) for _, sidecar in read_sidecars(self.bucket, kind, names))

    def read_manifest(self) -> dict | None:
        return self.read_json("manifest.json")

    def read_json(self, name: str) -> Any:
        data = self.bucket.get_bytes(name)
        return None if data is None else orjson.loads(data)


def open_run(location: str | Path) -> OutputLayout | BucketRun:
    """A run's files wherever they are: a local directory or a bucket prefix."""
    text = str(location)
    if text.startswith("file://"):
        return OutputLayout.at(text.removeprefix("file://"))
    return BucketRun(text) if is_url(text) else OutputLayout.at(text)


def bucket_status(url: str) -> dict[str, Any]:
    run = BucketRun(url)
    manifest = run.read_json("manifest.json")
    if manifest is None:
        raise ConfigError(
            f"{run.where} is not a regen output location (no manifest.json there)",
            hint="pass the --output-dir of a regen generate run",
        )
    progress = run.read_json("progress.json")
    parts = {n: run.read_json(n) for n in run.bucket.list("") if n.startswith("progress-")}
    age = time.time() - progress["updated_unix"] if progress else None
    alive = (
        age is not None and age < STALE_AFTER_S and progress["state"] not in ("finished", "stopped")
    )
    how = f"heartbeat {age:.0f}s ago from {progress['host']}" if progress else "no heartbeat yet"
    info = {
        "output_dir": run.where,
        **with_shards({"alive": alive, "pid": (progress or {}).get("pid"),
                       "host": (progress or {}).get("host"), "how": how,
                       "last_update_s_ago": None if age is None else round(age, 1),
                       "state": (progress or {}).get("state")}, parts),
        "files": {kind: run.count(kind) for kind in (COMPLETIONS, ERRORS)},
        "manifest": manifest_summary(manifest),
        "progress": progress,
    }  # fmt: skip
    info["eta"] = asdict(eta.from_status(info))
    return info
