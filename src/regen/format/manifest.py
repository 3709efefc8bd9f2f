"""manifest.json: what a run was asked to do, so a resume can refuse silent changes.

It holds the resolved configuration (never a secret: the API key's variable name only),
regen's version, the input file's size and fingerprint, and the history of sessions.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import xxhash

from regen import __version__
from regen.errors import RunStateError
from regen.format.sessions import session_key
from regen.jsonio import atomic_write_json, compression, count_lines, open_binary, read_json
from regen.urls import is_url

LOCK_NAME = ".manifest.lock"  # hidden: readers of the run ignore dot files


@dataclass(frozen=True)
class InputFingerprint:
    size: int
    xxh3_128: str
    lines: int

    def as_dict(self) -> dict[str, Any]:
        return {"size": self.size, "xxh3_128": self.xxh3_128, "lines": self.lines}


def fingerprint(path: str | Path) -> InputFingerprint:
    """Hash the whole file (xxh3 runs at several GB/s, so even 1M prompts take about a second)
    and count its lines in the same read. The line count (the run's total until the input
    pass has counted it exactly) is of the text: a compressed file's own bytes hold newlines
    at random."""
    packed = compression(path)
    with open_binary(path) as fh:
        hashed = _Hashing(fh)
        lines = count_lines(hashed, packed, path)  # type: ignore[arg-type]
    return InputFingerprint(hashed.size, hashed.digest.hexdigest(), lines)


class _Hashing:
    """A reader that hashes the bytes read through it."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw, self.digest, self.size = raw, xxhash.xxh3_128(), 0

    def read(self, n: int = -1) -> bytes:
        chunk = self.raw.read(n)
        self.digest.update(chunk)
        self.size += len(chunk)
        return chunk


def check_and_record(
    path: Path,
    *,
    config: dict[str, Any],
    input_fp: InputFingerprint,
    allow_changed_input: bool,
    allow_changed_sampling: bool,
    command: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Compare with the manifest of an earlier session (if any), then write the new one.
    `command`: the words that started this session, and where (what resumes it). Parts of
    one run (--shard I/N) may start at the same moment against one directory: the read and
    the write happen under a lock on it, so no part's session is lost."""
    with _exclusive(path.with_name(LOCK_NAME)):
        return _check_and_record(
            path,
            config,
            input_fp=input_fp,
            allow_changed_input=allow_changed_input,
            allow_changed_sampling=allow_changed_sampling,
            command=command,
        )


def _check_and_record(
    path: Path,
    config: dict[str, Any],
    input_fp: InputFingerprint,
    allow_changed_input: bool,
    allow_changed_sampling: bool,
    command: tuple[str, ...] | None,
) -> dict[str, Any]:
    previous = read_manifest(path)
    if previous is not None:
        _refuse_changes(previous, config, input_fp, allow_changed_input, allow_changed_sampling)
    session = {
        "id": uuid.uuid4().hex,  # what its end is recorded against, in any copy of this file
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "version": __version__,
        **({"command": list(command), "cwd": os.getcwd()} if command else {}),
    }
    manifest = {
        "version": __version__,
        "created": previous["created"] if previous else session["started"],
        "input": {"path": _from_anywhere(config["prompts"]), **input_fp.as_dict()},
        "earlier_inputs": _earlier_inputs(previous, input_fp),
        "config": config,
        "sessions": [*(previous or {}).get("sessions", []), session],
    }
    atomic_write_json(path, manifest)
    return manifest


def _from_anywhere(path: str) -> str:
    """The prompt file as any shell finds it: `regen check` from another directory reads
    it by this name (a bucket URL is that already)."""
    return path if is_url(path) else os.path.abspath(path)


@contextmanager
def _exclusive(lock_file: Path) -> Iterator[None]:
    """An exclusive flock on `lock_file`, held for the milliseconds of one read and write;
    the kernel drops it if the holder dies. A file opened for writing, not the directory:
    NFS takes an exclusive lock only on a file open for writing."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def record_session_end(path: Path, session: dict[str, Any], ended: dict[str, Any]) -> None:
    """Add `ended` (when, and what the session found out: each server's concurrency level)
    to this session's entry as its "ended", under the same lock as `check_and_record`."""
    with _exclusive(path.with_name(LOCK_NAME)):
        manifest = read_manifest(path)
        if manifest is None:
            return  # the output dir was removed under the run: nothing to add to
        key = session_key(session)
        sessions = [
            {**s, "ended": ended} if session_key(s) == key else s for s in manifest["sessions"]
        ]
        atomic_write_json(path, {**manifest, "sessions": sessions})


def _earlier_inputs(previous: dict[str, Any] | None, now: InputFingerprint) -> list[dict]:
    """Every other prompt file (size and digest) an earlier session of this run read: with
    --allow-changed-input, records may name lines of any of them."""
    if previous is None:
        return []
    earlier = [*previous.get("earlier_inputs", []), previous.get("input", {})]
    kept: dict[str, dict] = {}
    for entry in earlier:
        digest = entry.get("xxh3_128")
        if digest and digest != now.xxh3_128 and isinstance(entry.get("size"), int):
            kept[digest] = {"size": entry["size"], "xxh3_128": digest}
    return list(kept.values())


def same_lines_inputs(path: str | Path, earlier: list[dict]) -> set[str]:
    """The digests of the `earlier` inputs that are the start of `path`, up to a newline:
    prompts were only appended since, so their line numbers still name the same lines here.
    (Compressed files are not compared: their bytes say nothing about their lines.)"""
    if not earlier or compression(path):
        return set()
    found: set[str] = set()
    digest, at, last = xxhash.xxh3_128(), 0, b"\n"
    with open_binary(path) as fh:
        for entry in sorted(earlier, key=lambda e: e["size"]):
            while at < entry["size"]:
                chunk = fh.read(min(1 << 22, entry["size"] - at))
                if not chunk:
                    return found  # the file is shorter than this one was
                digest.update(chunk)
                at, last = at + len(chunk), chunk[-1:]
            if last == b"\n" and digest.hexdigest() == entry["xxh3_128"]:
                found.add(entry["xxh3_128"])
    return found


def check_same_input(previous: dict[str, Any], input_fp: InputFingerprint, prompts: str) -> None:
    """Refuse a prompt file other than the one this output dir was started from. Both files
    are named; --allow-changed-input is suggested only when the file grew (prompts appended),
    the change it is for, never for a different file."""
    old = previous.get("input", {})
    if old.get("xxh3_128") == input_fp.xxh3_128:
        return
    old_path = str(old.get("path", "?"))
    sizes = f"{old.get('lines', '?')} -> {input_fp.lines} lines, {old.get('size')} -> "
    if old.get("size") is not None and same_lines_inputs(prompts, [old]):
        raise RunStateError(
            f"the prompt file grew since this output dir was started from {old_path} "
            f"({sizes}{input_fp.size} bytes)",
            hint="pass --allow-changed-input to generate the new prompts too (finished ids "
            "are kept), or use a new --output-dir",
        )
    same = Path(old_path).resolve() == Path(prompts).resolve()
    what = "the prompt file changed" if same else f"--prompts {prompts} is a different file"
    raise RunStateError(
        f"this output dir was started from {old_path}; {what} "
        f"({sizes}{input_fp.size} bytes, not the same prompts with more appended)",
        hint=f"resume with --prompts {old_path} as it was, or use a new --output-dir for {prompts}",
    )


def read_manifest(path: Path) -> dict[str, Any] | None:
    return read_json(path) if path.exists() else None


def _refuse_changes(
    previous: dict[str, Any],
    config: dict[str, Any],
    input_fp: InputFingerprint,
    allow_input: bool,
    allow_sampling: bool,
) -> None:
    if not allow_input:
        check_same_input(previous, input_fp, config["prompts"])
    old_n, new_n = previous.get("config", {}).get("shards", 1), config.get("shards", 1)
    if old_n != new_n:
        raise RunStateError(
            f"this output was started as {old_n} shard(s); --shard now says {new_n}",
            hint=f"resume each part with --shard I/{old_n} (I = 0..{old_n - 1}, or the same "
            f"array size), or start a new --output-dir for {new_n} shards",
        )
    old = previous.get("config", {}).get("sampling", {})
    new = config.get("sampling", {})
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if changed and not allow_sampling:
        details = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed)
        raise RunStateError(
            f"sampling parameters differ from the earlier session ({details})",
            hint="use the same flags, a new --output-dir, or pass --allow-changed-sampling",
        )
