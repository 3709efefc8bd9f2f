"""Write files that belong in a bucket: locally first, then uploaded whole.

For verbs that write a few finished files (`prepare`): each target that is a URL gets a
local stand-in in a temporary directory, and is uploaded only when the block succeeds, so a
failed run leaves nothing half-written in the bucket. Local targets are used as they are.
For verbs that append to a folder as they go and resume from it (`score`): the bucket folder
is fetched into a local one, worked on there, and uploaded back however the block ends.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from regen.errors import StorageError
from regen.storage.bucket import Bucket
from regen.urls import is_url

log = logging.getLogger("regen.storage")


@contextmanager
def staged(*targets: str | None) -> Iterator[list[Path | None]]:
    """A local path for each target (None: a file not written, passed through)."""
    with tempfile.TemporaryDirectory(prefix="regen-publish-") as tmp:
        local = [
            None
            if t is None
            else Path(tmp) / f"{i}-{t.rstrip('/').rsplit('/', 1)[-1]}"
            if is_url(t)
            else Path(t)
            for i, t in enumerate(targets)
        ]
        yield local
        for target, path in zip(targets, local, strict=True):
            if target is not None and path is not None and is_url(target) and path.exists():
                folder, _, name = target.rstrip("/").rpartition("/")
                Bucket(folder).put_file(path, name)


def fetch_folder(url: str, local: Path, grows: Callable[[str], bool] = lambda name: False) -> Path:
    """Copy every file under the bucket folder `url` into `local`. A file that only `grows`
    (appended to, never rewritten) is kept locally when the local copy is no shorter: it holds
    at least what the bucket's does (an upload that failed last time)."""
    bucket = Bucket(url)
    for name, size in bucket.find("").items():
        target = local / name
        if grows(name) and target.is_file() and target.stat().st_size >= size:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(bucket.get_bytes(name) or b"")
    return local


@contextmanager
def worked_locally(
    url: str, local: Path, grows: Callable[[str], bool] = lambda name: False
) -> Iterator[Path]:
    """The bucket folder `url`, worked on in `local`: fetched first (a resume on a new machine
    goes on from it), and every file uploaded back when the block ends, however it ends, so
    an interrupted job keeps in the bucket what it did."""
    fetch_folder(url, local, grows)
    try:
        yield local
    except BaseException:
        _upload_folder(url, local, interrupted=True)
        raise
    _upload_folder(url, local)


def _upload_folder(url: str, local: Path, interrupted: bool = False) -> None:
    bucket = Bucket(url)
    try:
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            bucket.put_file(path, path.relative_to(local).as_posix())
    except StorageError as err:
        if not interrupted:
            raise
        # the error that stopped the block is the one to raise; this one is said, not lost
        log.warning("%s; the files stay in %s and go up on the next run", err, local)


def beside(target: str, suffix: str) -> str:
    """`s3://b/p/prompts.jsonl` -> `s3://b/p/prompts.rejects.jsonl` (as Path.with_suffix)."""
    folder, _, name = target.rpartition("/")
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return f"{folder}/{stem}{suffix}" if folder else f"{stem}{suffix}"
