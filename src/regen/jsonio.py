"""JSON and JSONL helpers shared by every verb: fast (orjson), streaming, zstd-aware, atomic."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import zstandard

ZST_SUFFIX = ".zst"


def dumps_line(obj: Any) -> bytes:
    """One JSONL line, newline included. Key order is kept (ids come first in our records)."""
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)


def dumps_pretty(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def canonical(obj: Any) -> bytes:
    """Key-sorted compact JSON: the same value always gives the same bytes (used for hashing)."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def open_binary(path: str | os.PathLike) -> io.BufferedIOBase:
    """Open a local path or an fsspec URL (s3://, gs://, ...) for reading bytes."""
    text = str(path)
    if "://" in text:
        import fsspec

        from regen.storage.bucket import mapped

        with mapped(f"cannot open {text}", missing_ok=True):
            # A fresh filesystem: a cached one may point at an endpoint set before.
            return fsspec.open(text, "rb", skip_instance_cache=True).open()
    return open(text, "rb")


def is_file(path: str | os.PathLike) -> bool:
    """Whether a local path or an fsspec URL names an existing file."""
    text = str(path)
    if "://" in text:
        import fsspec

        from regen.storage.bucket import mapped

        with mapped(f"cannot look up {text}", missing_ok=True):
            fs, inner = fsspec.core.url_to_fs(text, skip_instance_cache=True)
            return bool(fs.isfile(inner))
    return Path(text).is_file()


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """Yield (1-based line number, raw line without the newline); `.zst` files are decompressed.

    Streams: memory does not grow with the file. A final line with no newline is yielded too;
    callers that care about torn writes (the run ledger) check for that themselves.
    """
    raw = open_binary(path)
    stream: io.BufferedIOBase = raw
    if str(path).endswith(ZST_SUFFIX):
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        stream = io.BufferedReader(reader, buffer_size=1 << 20)  # type: ignore[arg-type]
    with raw, stream:
        for number, line in enumerate(stream, start=1):
            yield number, line.rstrip(b"\r\n")


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed value) for every non-blank line; raises on invalid JSON."""
    for number, line in iter_lines(path):
        if line.strip():
            yield number, orjson.loads(line)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write a file so that readers see either the old or the whole new content, never half."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_bytes(path, dumps_pretty(obj))


def read_json(path: str | os.PathLike) -> Any:
    with open_binary(path) as fh:
        return orjson.loads(fh.read())
