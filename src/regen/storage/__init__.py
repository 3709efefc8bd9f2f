"""Where a run's files live: a local directory or a bucket prefix, behind one `Store`.

Beneath the run (which writes through it) and above the output format (which it stores).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from regen.errors import ConfigError
from regen.storage.local import LocalStore
from regen.storage.remote import BucketStore
from regen.storage.store import Store, StoreOptions, default_staging
from regen.urls import is_url

__all__ = ["BucketStore", "LocalStore", "Store", "StoreOptions", "open_store", "require_runs"]


def open_store(location: str | Path, options: StoreOptions | None = None) -> Store:
    """The store of a run's location: a local path (or `file://` URL) or a bucket URL."""
    options = options or StoreOptions()
    text = str(location)
    if text.startswith("file://"):
        return LocalStore(text.removeprefix("file://"), options)
    if not is_url(text):
        return LocalStore(text, options)
    staging = options.staging_dir or default_staging(text, options.part.name)
    return BucketStore(text, staging, options)


def require_runs(locations: Iterable[str | Path]) -> None:
    """Refuse a local run path that does not exist, before anything slow (a tokenizer, a
    bucket) is touched: "does not exist" says more than "not a regen output dir"."""
    for location in locations:
        text = str(location).removeprefix("file://")
        if not is_url(text) and not Path(text).exists():
            raise ConfigError(
                f"{text} does not exist",
                hint="pass the --output-dir of a `regen generate` run (or its bucket URL)",
            )
