"""How a sealed shard is committed to a bucket, and how a bucket's shards are read back.

A shard `completions/part-X.jsonl[.zst]` is committed when its sidecar `part-X.jsonl[.zst].keys`
is in the bucket next to it and names the shard's size and xxh3-128 checksum. The data object
goes first, the sidecar second, so a reader that only trusts committed shards never sees half a
run. A data object with no sidecar was cut off between the two puts; it is whole (object stores
publish a PUT only once complete; other filesystems get a rename), so the next resume *adopts*
it: reads its keys and commits it. Adopting twice, or adopting a shard its writer then commits
itself, writes the same sidecar: both are harmless.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import xxhash
import zstandard

from regen.errors import RunStateError, StorageError
from regen.format.layout import COMPLETIONS, ERRORS
from regen.format.sidecar import SIDECAR_SUFFIX, ShardKeys, read_sidecar, record_line, sidecar_bytes
from regen.jsonio import ZST_SUFFIX
from regen.storage.bucket import Bucket

KINDS = (COMPLETIONS, ERRORS)


def is_data(name: str) -> bool:
    return name.endswith((".jsonl", ".jsonl" + ZST_SUFFIX))


def checksum(path: Path) -> str:
    digest = xxhash.xxh3_128()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def upload_shard(bucket: Bucket, kind: str, shard: Path) -> bool:
    """Put one sealed local shard and then its sidecar; True once both are in the bucket.
    False if the shard is no longer a sealed shard (nothing to do)."""
    keys = read_sidecar(shard)
    if keys is None:
        return False
    size, digest = shard.stat().st_size, checksum(shard)
    name = f"{kind}/{shard.name}"
    remote = bucket.get_bytes(name + SIDECAR_SUFFIX)
    if remote is not None and _matches(orjson.loads(remote), size, digest):
        return True  # committed by an earlier session that died before cleaning up
    bucket.put_file(shard, name)
    landed = bucket.size(name)
    if landed != size:
        raise StorageError(f"upload of {bucket.url_of(name)} landed {landed} of {size} bytes")
    bucket.put_bytes(name + SIDECAR_SUFFIX, sidecar_bytes(shard.name, size, keys, xxh3_128=digest))
    return True


def _matches(sidecar: dict, size: int, digest: str) -> bool:
    return sidecar.get("bytes") == size and sidecar.get("xxh3_128") == digest


@dataclass(frozen=True)
class Listing:
    """The data objects of one kind, split by whether their sidecar is there."""

    committed: dict[str, int]  # data name -> size
    uncommitted: dict[str, int]


def list_kind(bucket: Bucket, kind: str) -> Listing:
    files = bucket.list(kind)
    committed, uncommitted = {}, {}
    for name, size in files.items():
        if is_data(name):
            target = committed if name + SIDECAR_SUFFIX in files else uncommitted
            target[name] = size
    return Listing(dict(sorted(committed.items())), dict(sorted(uncommitted.items())))


def adopt(bucket: Bucket, kind: str, name: str) -> None:
    """Commit a data object whose writer died between its two puts."""
    data = bucket.get_bytes(f"{kind}/{name}")
    if data is None:
        return
    records = _parse(data, name, bucket)
    keys = ShardKeys.of((r.get("id"), r.get("sample"), record_line(r)) for r in records)
    sidecar = sidecar_bytes(name, len(data), keys, xxh3_128=xxhash.xxh3_128_hexdigest(data))
    bucket.put_bytes(f"{kind}/{name}{SIDECAR_SUFFIX}", sidecar)


def sidecar_count(sidecar: dict) -> int:
    """How many records a sidecar's shard holds (either format)."""
    return sidecar["count"] if "count" in sidecar else len(sidecar["keys"])


def read_sidecars(bucket: Bucket, kind: str, names: list[str]) -> Iterator[tuple[str, dict]]:
    """(data name, sidecar) for committed shards, fetched a batch at a time."""
    for start in range(0, len(names), 64):
        batch = names[start : start + 64]
        got = bucket.get_many([f"{kind}/{n}{SIDECAR_SUFFIX}" for n in batch])
        for n in batch:
            yield n, orjson.loads(got[f"{kind}/{n}{SIDECAR_SUFFIX}"])


def read_records(bucket: Bucket, kind: str, name: str) -> Iterator[dict]:
    data = bucket.get_bytes(f"{kind}/{name}")
    if data is None:
        raise RunStateError(
            f"{bucket.url_of(kind + '/' + name)} vanished while being read",
            hint="another process removed it; rerun the command",
        )
    yield from _parse(data, name, bucket)


def read_lines(bucket: Bucket, kind: str, name: str) -> Iterator[bytes]:
    """One committed shard's lines, unparsed: it is fetched whole, once."""
    for _, line in read_numbered_lines(bucket, kind, name):
        yield line


def read_numbered_lines(bucket: Bucket, kind: str, name: str) -> Iterator[tuple[int, bytes]]:
    """The same, with each line's number in the shard (blank lines counted, not yielded)."""
    data = bucket.get_bytes(f"{kind}/{name}")
    if data is None:
        raise RunStateError(
            f"{bucket.url_of(kind + '/' + name)} vanished while being read",
            hint="another process removed it; rerun the command",
        )
    if name.endswith(ZST_SUFFIX):
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        data = reader.read()
    yield from ((n, line) for n, line in enumerate(data.split(b"\n"), start=1) if line.strip())


def _parse(data: bytes, name: str, bucket: Bucket) -> Iterator[dict]:
    if name.endswith(ZST_SUFFIX):
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        data = reader.read()
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            yield orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise RunStateError(
                f"{bucket.url_of(name)} line {number} is not valid JSON",
                hint="the object was changed outside regen; move it aside and resume",
            ) from exc
