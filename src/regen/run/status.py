"""`regen status`: what a run is doing (or did), read from its output dir by any shell.

Alive or not comes from the run lock (held only by a living process); progress and rates
from the snapshot the run writes every few seconds; the finished counts from the output
files themselves, which are the ledger.
"""

from __future__ import annotations

import socket
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.jsonio import ZST_SUFFIX, iter_lines, read_json
from regen.run import eta
from regen.run.layout import COMPLETIONS, ERRORS, OutputLayout
from regen.run.lock import is_locked, read_holder
from regen.run.manifest import manifest_summary
from regen.run.sidecar import read_sidecar
from regen.scale.status import with_shards
from regen.storage.bucket import is_url
from regen.storage.reader import bucket_status

STALE_AFTER_S = 60.0


def read_status(output_dir: str | Path) -> dict[str, Any]:
    if is_url(output_dir) and not str(output_dir).startswith("file://"):
        return bucket_status(str(output_dir))
    layout = OutputLayout.at(str(output_dir).removeprefix("file://"))
    if not layout.manifest.exists():
        raise ConfigError(
            f"{layout.root} is not a regen output dir (no manifest.json)",
            hint="pass the --output-dir of a regen generate run",
        )
    manifest = read_json(layout.manifest)
    progress = read_json(layout.progress) if layout.progress.exists() else None
    alive = _liveness(layout, progress)
    if progress is not None and not alive["alive"]:
        progress = _at_exit(progress)
    parts = {p.name: read_json(p) for p in layout.root.glob("progress-*.json")}
    info = {
        "output_dir": str(layout.root),
        **with_shards(alive, parts),
        "files": {kind: count_records(layout, kind) for kind in (COMPLETIONS, ERRORS)},
        "manifest": manifest_summary(manifest),
        "progress": progress,
    }
    info["eta"] = asdict(eta.from_status(info))
    return info


def _liveness(layout: OutputLayout, progress: dict | None) -> dict[str, Any]:
    holder = read_holder(layout.lock) or {}
    here = socket.gethostname()
    age = time.time() - progress["updated_unix"] if progress else None
    if progress and progress.get("host") not in (None, here):
        # Another machine: only the heartbeat can tell.
        alive = (
            age is not None
            and age < STALE_AFTER_S
            and progress["state"] not in ("finished", "stopped", "calibrated")
        )
        how = f"heartbeat {age:.0f}s ago from {progress['host']}"
    else:
        alive = is_locked(layout.lock)
        how = "holds the run lock" if alive else "no process holds the run lock"
    return {
        "alive": alive,
        "pid": holder.get("pid") or (progress or {}).get("pid"),
        "host": holder.get("host") or (progress or {}).get("host"),
        "how": how,
        "last_update_s_ago": None if age is None else round(age, 1),
        "state": (progress or {}).get("state"),
    }


def _at_exit(progress: dict[str, Any]) -> dict[str, Any]:
    """A run that is not alive has nothing in flight: its last snapshot's in-flight counts
    are history (kept as `in_flight_at_exit`), not the present."""
    servers = [
        {**s, "in_flight": 0, "in_flight_at_exit": s.get("in_flight", 0)}
        for s in progress.get("servers", [])
    ]
    return {**progress, "servers": servers}


def count_records(layout: OutputLayout, kind: str) -> int:
    """Whole lines in the shards of `kind` (sidecars make sealed shards cheap to count)."""
    total = 0
    for shard in layout.shard_files(kind):
        keys = read_sidecar(shard)
        if keys is not None:
            total += len(keys)
        elif shard.name.endswith(ZST_SUFFIX):
            total += sum(1 for _, line in iter_lines(shard) if line.strip())
        else:
            with open(shard, "rb") as fh:
                total += sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    return total
