"""Settle a staging directory against its bucket when a run starts.

Shards left in staging by a session that died are uploaded by the next session on the same
machine, which is how nothing is lost. But if, meanwhile, another machine resumed the run from
the bucket, it has redone those records; uploading the old staging copies would duplicate them.
So before anything is uploaded, every staged record whose key is already committed in the
bucket is dropped from staging (its shard is rewritten without it; the ledger scan reseals it).
This reads the bucket's sidecars once more, but only when staging holds leftovers.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson

from regen.format.layout import OutputLayout
from regen.format.sidecar import ShardKeys, sidecar_path
from regen.jsonio import ZST_SUFFIX, atomic_write_bytes, iter_lines
from regen.records import Key, record_key
from regen.storage.bucket import Bucket
from regen.storage.shards import KINDS, read_sidecars

log = logging.getLogger("regen.storage")


def drop_superseded(layout: OutputLayout, bucket: Bucket, remote: dict[str, list[str]]) -> int:
    """Remove staged records already committed in the bucket; returns how many were removed."""
    staged = [(kind, p) for kind in KINDS for p in layout.shard_files(kind)]
    if not staged or not any(remote.values()):
        return 0
    committed: set[Key] = set()
    for kind in KINDS:
        for _, sidecar in read_sidecars(bucket, kind, remote[kind]):
            keys = ShardKeys.from_json(sidecar).record_keys
            committed.update(keys[keys != 0].tolist())  # 0: an unusable line, not a key
    dropped = 0
    for _, shard in staged:
        dropped += _rewrite_without(shard, committed)
    if dropped:
        log.warning("dropped %d staged records that another session already uploaded", dropped)
    return dropped


def _rewrite_without(shard: Path, committed: set[Key]) -> int:
    kept: list[bytes] = []
    dropped = 0
    for _, line in iter_lines(shard):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            kept.append(line)  # a torn last line: the ledger scan cuts it as usual
            continue
        if record.get("sample") is not None and record_key(record["id"], record["sample"]) in (
            committed
        ):
            dropped += 1
        else:
            kept.append(line)
    if not dropped:
        return 0
    plain = shard.with_name(shard.name.removesuffix(ZST_SUFFIX))
    sidecar_path(shard).unlink(missing_ok=True)
    if kept:
        atomic_write_bytes(plain, b"".join(line + b"\n" for line in kept))
    elif plain.exists():
        os.unlink(plain)
    if shard != plain:
        shard.unlink(missing_ok=True)
    return dropped
