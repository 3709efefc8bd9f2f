"""JSON and JSONL helpers shared by every verb: fast (orjson), streaming, zstd-aware, atomic."""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson
import zstandard

from regen.errors import InputFileError
from regen.output_place import place_of, streamed
from regen.urls import is_url

ZST_SUFFIX = ".zst"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
CHUNK = 1 << 20


def dumps_line(obj: Any) -> bytes:
    """One JSONL line, newline included. Key order is kept (ids come first in our records)."""
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)


def dumps_pretty(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def canonical(obj: Any) -> bytes:
    """Key-sorted compact JSON: the same value always gives the same bytes (used for hashing).
    A numpy integer array is written as the list of its values (an exported row's token
    columns, held as arrays, hash as their lists do)."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)


def open_binary(path: str | os.PathLike) -> io.BufferedIOBase:
    """Open a local path or an fsspec URL (s3://, gs://, ...) for reading bytes."""
    text = str(path)
    if is_url(text):
        import fsspec

        from regen.urls import mapped

        with mapped(f"cannot open {text}", missing_ok=True):
            # A fresh filesystem: a cached one may point at an endpoint set before.
            return fsspec.open(text, "rb", skip_instance_cache=True).open()
    return open(text, "rb", buffering=CHUNK)  # a line of 20K tokens is ~100 KB: read it whole


def is_file(path: str | os.PathLike) -> bool:
    """Whether a local path or an fsspec URL names an existing file."""
    text = str(path)
    if is_url(text):
        import fsspec

        from regen.urls import mapped

        with mapped(f"cannot look up {text}", missing_ok=True):
            fs, inner = fsspec.core.url_to_fs(text, skip_instance_cache=True)
            return bool(fs.isfile(inner))
    return Path(text).is_file()


def compression(path: str | os.PathLike) -> str | None:
    """ "zstd", "gzip" or None, from the file's first bytes (not its name: a gzip file named
    `.jsonl` is common, and reading it as text would turn every line into garbage)."""
    with open_binary(path) as fh:
        head = fh.read(4)
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    return None


def iter_lines(
    path: str | os.PathLike, skip: Iterator[tuple[int, int]] | None = None
) -> Iterator[tuple[int, bytes]]:
    """Yield (1-based line number, raw line without the newline); zstd and gzip files are
    decompressed, whatever their name.

    Streams: memory does not grow with the file. A final line with no newline is yielded too;
    callers that care about torn writes (the run ledger) check for that themselves. A
    compressed stream that ends mid-frame raises InputFileError naming the file and how far
    it got: a truncated download must not read as a short file.

    `skip`: (first, last) runs of line numbers, in order, that are passed over unread: only
    their newlines are counted, at memory speed, so a resume need not split out (let alone
    parse) the millions of lines it has finished.
    """
    kind = compression(path)
    lines = _LineCount()
    with open_binary(path) as raw:
        stream = raw
        if kind:  # C-speed line splitting over the decompressed chunks
            chunks = _Chunks(_decompressed(raw, kind, path))
            stream = io.BufferedReader(chunks, buffer_size=CHUNK)  # type: ignore[assignment]
        try:
            # a byte order mark (Windows tools write one) is no part of the first line
            head = stream.readline().removeprefix(UTF8_BOM)
            if skip is None:
                if head:
                    lines.n = 1
                    yield 1, head.rstrip(b"\r\n")
                for lines.n, line in enumerate(stream, start=2):
                    yield lines.n, line.rstrip(b"\r\n")
            else:
                yield from _skipping(stream, skip, lines, head)
        except _Truncated as cut:
            raise InputFileError(
                f"{path} is truncated: its {kind} stream ends mid-frame after {lines.n} whole "
                f"line(s) ({cut.decompressed:,} bytes decompressed)",
                hint="copy or download the file again (or recompress it); lines read so far "
                "are kept",
            ) from None


def count_lines(raw: io.BufferedIOBase, kind: str | None, path: object) -> int:
    """Lines of the text read from `raw` (decompressed if `kind`), as iter_lines numbers
    them, at memory speed. Of a truncated compressed file, the lines before the cut: reading
    it says the rest."""
    count = 0
    last = b"\n"
    chunks = _decompressed(raw, kind, path) if kind else iter(lambda: raw.read(CHUNK), b"")
    try:
        for chunk in chunks:
            count += chunk.count(b"\n")
            last = chunk[-1:]
    except _Truncated:
        return count  # iter_lines raises InputFileError at the cut, naming the line
    return count + (last != b"\n")  # a last line with no newline is a line too


class _LineCount:
    n = 0


def _skipping(
    stream: io.BufferedIOBase, runs: Iterator[tuple[int, int]], lines: _LineCount, head: bytes
) -> Iterator[tuple[int, bytes]]:
    """iter_lines' loop with runs of lines passed over. Lines are cut from CHUNK-sized reads
    by hand up to the last run; then the stream's own (C) line iterator takes over. `head`:
    what was read of the stream already (its first line)."""
    buf, pos = head, 0
    for first, last in runs:
        while lines.n < first - 1:  # the lines before the run, one by one
            end = buf.find(b"\n", pos)
            if end >= 0:
                lines.n += 1
                yield lines.n, buf[pos:end].rstrip(b"\r")
                pos = end + 1
                continue
            more = stream.read(CHUNK)
            if not more:  # the file ends before the run (it cannot, for the same input)
                if pos < len(buf):
                    lines.n += 1
                    yield lines.n, buf[pos:].rstrip(b"\r")
                return
            buf, pos = buf[pos:] + more, 0
        to_skip = last - lines.n
        while to_skip > 0:  # count newlines: whole buffers, then up to the run's last line
            newlines = buf.count(b"\n", pos)
            if newlines >= to_skip:
                ends = np.flatnonzero(np.frombuffer(buf, np.uint8, offset=pos) == ord("\n"))
                pos += int(ends[to_skip - 1]) + 1
                lines.n += to_skip
                break
            lines.n += newlines
            to_skip -= newlines
            buf, pos = stream.read(CHUNK), 0
            if not buf:
                return  # the file ends inside the run
    while (end := buf.find(b"\n", pos)) >= 0:
        lines.n += 1
        yield lines.n, buf[pos:end].rstrip(b"\r")
        pos = end + 1
    tail = buf[pos:]  # the start of a line whose end the stream has not given yet
    for line in stream:
        if tail:
            line, tail = tail + line, b""
        lines.n += 1
        yield lines.n, line.rstrip(b"\r\n")
    if tail:
        lines.n += 1
        yield lines.n, tail.rstrip(b"\r")


class _Chunks(io.RawIOBase):
    """A readable stream over an iterator of byte chunks."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._view = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        while not self._view:
            chunk = next(self._chunks, b"")
            if not chunk:
                return 0
            self._view = memoryview(chunk)
        n = min(len(buffer), len(self._view))
        buffer[:n] = self._view[:n]
        self._view = self._view[n:]
        return n


class _Truncated(Exception):
    def __init__(self, decompressed: int) -> None:
        self.decompressed = decompressed


def _decompressed(raw: io.BufferedIOBase, kind: str, path: object) -> Iterator[bytes]:
    """Decompressed chunks of a (possibly multi-frame / multi-member) zstd or gzip stream."""
    new = (
        zstandard.ZstdDecompressor().decompressobj
        if kind == "zstd"
        else lambda: zlib.decompressobj(16 + zlib.MAX_WBITS)
    )
    dobj, in_frame, total = new(), False, 0
    while data := raw.read(CHUNK):
        while data:
            try:
                out = dobj.decompress(data)
            except (zstandard.ZstdError, zlib.error, gzip.BadGzipFile) as exc:
                raise InputFileError(
                    f"{path} is not a valid {kind} stream ({exc}) after {total:,} bytes",
                    hint="check the file, or decompress it yourself and pass the result",
                ) from exc
            in_frame = True
            total += len(out)
            if out:
                yield out
            if not dobj.eof:
                break
            data, dobj, in_frame = dobj.unused_data, new(), False  # the next frame / member
    if in_frame:
        raise _Truncated(total)


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed value) for every non-blank line; raises on invalid JSON."""
    for number, line in iter_lines(path):
        if line.strip():
            yield number, orjson.loads(line)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, option: str = "the output") -> None:
    """Write a file so that readers see either the old or the whole new content, never half
    (see `atomic_writer`)."""
    with atomic_writer(path, option) as fh:
        fh.write(data)


@contextmanager
def atomic_writer(path: str | os.PathLike, option: str = "the output") -> Iterator[BinaryIO]:
    """A file to write whose content replaces `path` whole when the block succeeds: written
    as a temporary twin beside it and renamed over it (removed if the block fails: a full
    disk must not also leave litter behind). A stream (/dev/null, /dev/stdout) is written
    straight through; a device, a FIFO or a socket is refused (see `output_place`)."""
    place = place_of(path, option)  # `option`: the flag that named the path, for messages
    if place.is_stream:
        with streamed(place) as fh:
            yield fh
        return
    target = place.path
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | os.PathLike, obj: Any, option: str = "the output") -> None:
    atomic_write_bytes(path, dumps_pretty(obj), option)


def read_json(path: str | os.PathLike) -> Any:
    with open_binary(path) as fh:
        return orjson.loads(fh.read())
