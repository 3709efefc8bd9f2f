"""A sealed shard's `.keys` sidecar: what a resume needs from a shard without parsing it.

For each record, in order: its exactly-once key (`record_key(id, sample)`), the xxh3-64 of
its id (which decides the `--shard` part that owns it) and its input line number (which lets
a resume pass over finished input lines without parsing them). Each is stored as one base64
string of little-endian integers (8, 8 and 4 bytes): 27 characters a record, and a resume at
10M records decodes them in a fraction of a second, where `[id, sample]` strings took four
(and JSON integers, 47 characters a record, one and a half). A 0 stands for "none": an
unusable input line in errors/ has no id or sample (a real key of 0 has odds of 2^-64).

The sidecar is a cache of its shard: it names the shard's size, and one that does not match
is ignored and rebuilt from the records. Format 1 sidecars (`"keys": [[id, sample], ...]`,
no lines) are still read.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import xxhash

from regen.jsonio import atomic_write_bytes
from regen.records import record_key

SIDECAR_SUFFIX = ".keys"
FORMAT = 2
KEY, LINE = np.dtype("<u8"), np.dtype("<u4")  # input lines past 4 billion are not expected

Entry = tuple[Any, Any, Any]  # (id, sample, input line) of one record; any may be None


@dataclass
class ShardKeys:
    record_keys: np.ndarray  # uint64, 0 where the record has no sample
    id_keys: np.ndarray  # uint64, 0 where the record has no id
    lines: np.ndarray | None  # int64 input line numbers; None when a format 1 sidecar lacks them

    @classmethod
    def of(cls, entries: Iterable[Entry]) -> ShardKeys:
        rows = [
            (
                record_key(str(prompt_id), sample)
                if prompt_id is not None and sample is not None
                else 0,
                xxhash.xxh3_64_intdigest(str(prompt_id).encode()) if prompt_id is not None else 0,
                line if isinstance(line, int) else 0,
            )
            for prompt_id, sample, line in entries
        ]
        table = np.array(rows, dtype=np.uint64).reshape(-1, 3)
        return cls(table[:, 0].copy(), table[:, 1].copy(), table[:, 2].astype(np.int64))

    def __len__(self) -> int:
        return len(self.record_keys)

    def as_json(self) -> dict[str, Any]:
        assert self.lines is not None, "a new sidecar always has its lines"
        return {
            "format": FORMAT,
            "count": len(self),
            "record_keys": _pack(self.record_keys, KEY),
            "id_keys": _pack(self.id_keys, KEY),
            "lines": _pack(self.lines, LINE),
        }

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> ShardKeys:
        if payload.get("format") == FORMAT:
            return cls(
                _unpack(payload["record_keys"], KEY),
                _unpack(payload["id_keys"], KEY),
                _unpack(payload["lines"], LINE).astype(np.int64),
            )
        old = cls.of((k[0], k[1], None) for k in payload["keys"])  # format 1
        old.lines = None
        return old


def _pack(values: np.ndarray, dtype: np.dtype) -> str:
    return base64.b64encode(values.astype(dtype).tobytes()).decode("ascii")


def _unpack(text: str, dtype: np.dtype) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=dtype)


def record_line(record: dict) -> int | None:
    """The input line a record came from: `line` in errors/, `meta.line` in completions/."""
    meta = record.get("meta")
    return record.get("line", meta.get("line") if isinstance(meta, dict) else None)


def sidecar_path(shard: Path) -> Path:
    return shard.with_name(shard.name + SIDECAR_SUFFIX)


def sidecar_bytes(shard_name: str, size: int, keys: ShardKeys, **extra: Any) -> bytes:
    return orjson.dumps({"shard": shard_name, "bytes": size, **extra, **keys.as_json()})


def write_sidecar(shard: Path, keys: ShardKeys) -> None:
    atomic_write_bytes(sidecar_path(shard), sidecar_bytes(shard.name, shard.stat().st_size, keys))


def read_sidecar(shard: Path) -> ShardKeys | None:
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
    return ShardKeys.from_json(payload)


# A shard committed somewhere else (a bucket) and not staged here, as a resume reads it:
# (kind, shard name, payload): a completions shard's keys, or an errors shard's records.
RemoteShard = tuple[str, str, "ShardKeys | list[dict]"]
