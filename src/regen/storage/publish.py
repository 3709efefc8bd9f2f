"""Write files that belong in a bucket: locally first, then uploaded whole.

For verbs that write a few finished files (`prepare`): each target that is a URL gets a
local stand-in in a temporary directory, and is uploaded only when the block succeeds, so a
failed run leaves nothing half-written in the bucket. Local targets are used as they are.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from regen.storage.bucket import Bucket
from regen.urls import is_url


@contextmanager
def staged(*targets: str) -> Iterator[list[Path]]:
    with tempfile.TemporaryDirectory(prefix="regen-publish-") as tmp:
        local = [
            Path(tmp) / f"{i}-{t.rstrip('/').rsplit('/', 1)[-1]}" if is_url(t) else Path(t)
            for i, t in enumerate(targets)
        ]
        yield local
        for target, path in zip(targets, local, strict=True):
            if is_url(target) and path.exists():
                folder, _, name = target.rstrip("/").rpartition("/")
                Bucket(folder).put_file(path, name)


def beside(target: str, suffix: str) -> str:
    """`s3://b/p/prompts.jsonl` -> `s3://b/p/prompts.rejects.jsonl` (as Path.with_suffix)."""
    folder, _, name = target.rpartition("/")
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return f"{folder}/{stem}{suffix}" if folder else f"{stem}{suffix}"
