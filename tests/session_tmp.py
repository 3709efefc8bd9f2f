"""One temporary folder for the whole test session, removed when the session ends
(conftest's pytest_sessionfinish): the caches, tokenizers and fleets that outlive a single
test live here rather than loose in /tmp, where every run used to leave its own."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(tempfile.mkdtemp(prefix="regen-tests-"))


def folder(prefix: str) -> Path:
    """A new folder under the session's root."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=ROOT))


def remove() -> None:
    """The root and all under it; what cannot be removed is named, not hidden."""
    try:
        shutil.rmtree(ROOT)
    except OSError as error:
        print(f"\nthe session's temporary folder was not all removed: {error}", file=sys.stderr)
