"""`regen status`: what a run is doing (or did), read from its location by any shell.

One path for a directory and a bucket (`regen.storage.Store`): alive or not comes from the
store (a local run's lock, a remote writer's heartbeat); progress and rates from the snapshot
the run writes every few seconds; the finished counts from the output files themselves,
which are the ledger, and the items from the run's own count (`regen.run.counts`).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.format.layout import COMPLETIONS, ERRORS
from regen.format.sessions import manifest_summary
from regen.run import eta
from regen.run.counts import run_count
from regen.run.parts_status import with_shards
from regen.storage import open_store, require_runs


def read_status(location: str | Path) -> dict[str, Any]:
    require_runs([location])
    store = open_store(location)
    manifest = store.read_manifest()
    if manifest is None:
        raise ConfigError(
            f"{store.where} is not a regen {store.noun} (no manifest.json there)",
            hint="pass the --output-dir of a regen generate run",
        )
    progress = store.read_json(store.layout.progress.name)
    alive = store.liveness(progress)
    if progress is not None and not alive["alive"]:
        progress = _at_exit(progress)
    info = {
        "output_dir": store.where,
        **with_shards(alive, store.part_progress(), manifest["config"].get("shards", 1)),
        "files": {kind: store.count(kind) for kind in (COMPLETIONS, ERRORS)},
        "manifest": manifest_summary(manifest),
        "progress": progress,
    }
    whole = None if info["shards"] else progress  # a sharded run's parts count their own
    info["count"] = asdict(run_count(manifest, whole, info["files"]))
    info["eta"] = asdict(eta.from_status(info))
    return info


def _at_exit(progress: dict[str, Any]) -> dict[str, Any]:
    """A run that is not alive has nothing in flight: its last snapshot's in-flight counts
    are history (kept as `in_flight_at_exit`), not the present."""
    servers = [
        {**s, "in_flight": 0, "in_flight_at_exit": s.get("in_flight", 0)}
        for s in progress.get("servers", [])
    ]
    return {**progress, "servers": servers}


def model_of(location: str | Path) -> str | None:
    """The model a run was generated with, from its manifest (`embedded` for the embedded
    model, as `--tokenizer embedded` names its tokenizer); None when it does not say."""
    manifest = open_store(location).read_manifest()
    config = (manifest or {}).get("config", {})
    return "embedded" if config.get("embedded") else config.get("model")
