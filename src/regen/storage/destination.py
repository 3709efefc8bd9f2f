"""A file or folder a verb writes and finishes in one go (check's reports, export's dataset,
demo's files, prepare's prompt file): a local path or a bucket URL, behind one `Destination`.

The verb always writes a local path: the target itself, or for a bucket a stand-in in a
temporary directory that is published only when the block succeeds (a folder's files
uploaded whole, its marker files last, and files the bucket held that the folder no longer
has deleted), so a failed verb leaves nothing half-written in the bucket. A bucket folder is
fetched first, so that what the verb checks there (an earlier export, --merge-into) is what
the bucket holds. Credentials come from the environment, as for a run in a bucket (see
`storage.bucket`); nothing about them is written anywhere.

A local target that cannot be written (read-only, full, its folder gone) is an OutputError
naming it and the option (exit 6); a bucket that refuses is a StorageError (exit 6). What is
at a local target is looked at first (`regen.output_place`): /dev/null, a terminal or
/dev/stdout is written straight through (a file), a device, FIFO or socket refused (exit 2).
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from regen.errors import UNWRITABLE_ERRNOS, OutputError
from regen.jsonio import atomic_write_bytes, atomic_write_json
from regen.output_place import in_the_way, make_folder, place_of
from regen.storage.bucket import Bucket
from regen.storage.publish import fetch_folder
from regen.urls import is_url

# A write that failed because of where it went, not what it wrote: no room (EFBIG: a file
# size limit), no permission, a read-only mount, or a folder removed under the verb.
FAILED_WRITES = UNWRITABLE_ERRNOS | {errno.EFBIG, errno.ENOENT, errno.ENOTDIR}


class Destination:
    """`given`: the path or URL as the user typed it; `option`: the flag that named it (or
    what the place is, for one the verb chose itself)."""

    def __init__(self, given: str, option: str) -> None:
        given = given.removeprefix("file://")
        self.given = given if is_url(given) else str(Path(given))  # `out/` names `out`
        self.option = option

    def __repr__(self) -> str:
        return f"Destination({self.given!r}, {self.option!r})"

    def __str__(self) -> str:
        return self.given

    @property
    def is_bucket(self) -> bool:
        return is_url(self.given)

    @property
    def where(self) -> str:
        return self.given

    def join(self, name: str) -> str:
        """A file inside a folder destination, as the user would name it."""
        return f"{self.given.rstrip('/')}/{name}"

    # -- files ---------------------------------------------------------------------------
    def write_bytes(self, data: bytes) -> None:
        with self.local_file() as path:
            atomic_write_bytes(path, data, self.option)

    def write_json(self, obj: Any) -> None:
        with self.local_file() as path:
            atomic_write_json(path, obj, self.option)

    @contextmanager
    def local_file(self) -> Iterator[Path]:
        """The path to write the file at; a bucket's file is uploaded when the block ends."""
        if not self.is_bucket:
            target = Path(self.given)
            with self.mapped(target):
                if not place_of(target, self.option).is_stream:  # a stream's folder is /dev
                    target.parent.mkdir(parents=True, exist_ok=True)
                yield target
            return
        folder, _, name = self.given.rstrip("/").rpartition("/")
        with tempfile.TemporaryDirectory(prefix="regen-publish-") as tmp:
            local = Path(tmp) / name
            with self.mapped(local):
                yield local
            if local.exists():
                Bucket(folder).put_file(local, name)

    def check_writable(self) -> None:
        """Before the verb's work, not after it: what is there can take a file (not a folder,
        a device, a file where a folder goes: exit 2), and its folder can be made and
        written in (exit 6). A bucket is asked when the file is put."""
        if self.is_bucket or place_of(self.given, self.option).is_stream:
            return  # a stream is written as it is: nothing to probe beside /dev/null
        target = Path(self.given)
        probe = target.with_name(f".{target.name}.probe-{os.getpid()}")
        with self.mapped(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            probe.write_bytes(b"")
            probe.unlink()

    # -- folders -------------------------------------------------------------------------
    @contextmanager
    def local_folder(self, last: Sequence[str] = (), staging: Path | None = None) -> Iterator[Path]:
        """The folder to write in; a bucket's is fetched first and published when the block
        succeeds, the files named in `last` (markers that say the folder is whole) last. A
        bucket's local copy is a `regen-publish-*` folder under `staging` (None: the system's
        temporary folder, $TMPDIR or /tmp), removed however the block ends."""
        if not self.is_bucket:
            folder = Path(self.given)
            place_of(folder, self.option, "folder")  # a file or a device there: refused
            with self.mapped(folder):
                yield folder
            return
        if staging is not None:
            make_folder(staging, "--staging-dir")
        with tempfile.TemporaryDirectory(prefix="regen-publish-", dir=staging) as tmp:
            local = Path(tmp) / "folder"
            bucket = Bucket(self.given)
            before = set(bucket.find(""))
            fetch_folder(self.given, local)
            for name in last:  # a hidden marker is not listed by `find`
                data = None if name in before else bucket.get_bytes(name)
                if data is not None:
                    local.mkdir(parents=True, exist_ok=True)
                    (local / name).write_bytes(data)
            with self.mapped(local):
                yield local
            publish_folder(local, bucket, last, before)

    @contextmanager
    def mapped(self, local: Path) -> Iterator[None]:
        """A failed write under `local` becomes an OutputError that names the destination."""
        try:
            yield
        except OSError as exc:
            if exc.errno not in FAILED_WRITES or not _under(exc, local):
                raise
            raise self.cannot_write(local, exc) from exc

    def cannot_write(self, local: Path, exc: OSError) -> OutputError:
        where = self.given if not self.is_bucket else f"{local} (the local copy of {self.given})"
        elsewhere = f" (or give {self.option} another place)" if self.option[:2] == "--" else ""
        blocker = in_the_way(local.parent) if exc.errno == errno.ENOTDIR else None
        if blocker is not None:
            what = "a file" if blocker.is_file() else "not a folder"
            why, fix = f"{blocker} is {what}, where a folder should be", f"move {blocker} away"
        elif exc.errno in (errno.ENOENT, errno.ENOTDIR):
            why = "its folder is gone (removed while regen wrote it)"
            fix = "make the folder again"
        else:
            why, fix = exc.strerror or str(exc), "free space, make it writable or fix the mount"
        return OutputError(
            f"cannot write {self.option} {where}: {why}",
            hint=f"{fix}{elsewhere}, then run the same command again",
        )


def publish_folder(local: Path, bucket: Bucket, last: Sequence[str], before: set[str]) -> None:
    """Upload every file of `local`, the `last` ones after all others; then delete what the
    bucket held before that the folder no longer has (an export replaced by --overwrite)."""
    files = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    ordered = [f for f in files if f not in last] + [f for f in last if f in files]
    for name in ordered:
        bucket.put_file(local / name, name)
    for name in sorted(before - set(files)):
        bucket.delete(name)


def _under(exc: OSError, local: Path) -> bool:
    """Whether the error is about `local` (or a file in it, or its temporary twin beside it).
    A write error without a file name (ENOSPC on write) is taken as the destination's: the
    verbs read their inputs before or apart from writing."""
    if exc.filename is None:
        return exc.errno != errno.ENOENT
    failed = Path(exc.filename).absolute()
    root = local.absolute()
    # the target, a file in it, a folder on its way, or its temporary twin beside it
    twin = failed.parent == root.parent and failed.name.startswith(f".{root.name}")
    return root in (failed, *failed.parents) or failed in root.parents or twin
