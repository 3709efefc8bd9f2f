"""A run's location, behind one interface: `open_store(location)` gives a `LocalStore` for a
directory or a `BucketStore` for a bucket prefix (any fsspec URL), and no other code asks
which one it has.

Readers (`regen status`, `check`, `export`, `plan --from-run`) use a store as it comes from
`open_store`: it creates nothing. A writer (`regen generate`) enters it: the store then takes
the run lock (and, in a bucket, this part's lease), settles what a killed session left, and on
exit makes sure everything written is where it belongs. In between, the run writes into
`store.layout` (the directory itself, or the bucket's local staging) and calls the hooks:
`committed()` (ledger entries already in the bucket), `set_errors_aside()` (--retry-errors),
`start()` (after the ledger scan; it is given what to call if the lease is lost), `room()`
(before each request) and `seal_after`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import xxhash

from regen.cache_dir import cache_dir
from regen.format.layout import COMPLETIONS, OutputLayout
from regen.format.part import WHOLE, Part
from regen.format.sidecar import RemoteShard
from regen.storage.lease import LeaseLost
from regen.storage.uploader import UploadPolicy

Liveness = dict[str, Any]  # alive, pid, host, how, last_update_s_ago, state


@dataclass(frozen=True)
class StoreOptions:
    """How a writer uses its location: the part it runs (its own lock, lease, progress file
    and staging), and for a bucket, where shards are staged and how they are uploaded."""

    part: Part = WHOLE
    staging_dir: Path | None = None  # None: under ~/.cache/regen/staging
    upload_interval: float = 300.0  # seconds: an open shard older than this is sealed, uploaded
    upload: UploadPolicy = field(default_factory=UploadPolicy)


class Store(ABC):
    layout: OutputLayout
    seal_after: float | None = None
    noun = "output location"  # what a user calls it, in messages

    # -- reading -------------------------------------------------------------------------
    @property
    def where(self) -> str:
        """The location as the user named it: a path, or the bucket URL."""
        return self.layout.where

    @abstractmethod
    def read_json(self, name: str) -> Any:
        """A small JSON file at the run's top (manifest.json, progress*.json), or None."""

    def read_manifest(self) -> dict | None:
        return self.read_json("manifest.json")

    @abstractmethod
    def part_progress(self) -> dict[str, dict]:
        """{progress file name: snapshot} of each --shard part."""

    @abstractmethod
    def shard_names(self, kind: str) -> list[str]:
        """Finished data shards of `kind` (completions or errors), in creation order."""

    @abstractmethod
    def iter_records(self, kind: str = COMPLETIONS) -> Iterator[dict]:
        """Every finished record of `kind`, in shard order."""

    def iter_lines(self, kind: str = COMPLETIONS) -> Iterator[bytes]:
        """The same records as lines of JSON, unparsed: for workers that parse them."""
        for record in self.iter_records(kind):
            yield orjson.dumps(record)

    @abstractmethod
    def iter_numbered_lines(self, kind: str = COMPLETIONS) -> Iterator[tuple[str, int, bytes]]:
        """The same lines with where each is: (the shard as the user names it, its line
        number there): what a message about one line names."""

    @abstractmethod
    def count(self, kind: str) -> int:
        """How many finished records of `kind` there are (cheap: from the sidecars)."""

    @abstractmethod
    def liveness(self, progress: dict | None) -> Liveness:
        """Whether a process is working on the run now, and how that is known."""

    # -- writing -------------------------------------------------------------------------
    @abstractmethod
    def __enter__(self) -> Store: ...

    @abstractmethod
    def __exit__(self, exc_type: object, *rest: object) -> None: ...

    def committed(self) -> Iterator[RemoteShard]:
        return iter(())

    @abstractmethod
    def set_errors_aside(self) -> int:
        """--retry-errors: this part's error shards leave the ledger (kept in errors-retried/),
        so their keys are pending again. Returns how many shards were set aside."""

    def start(self, event: Callable[[str], None], lost: Callable[[LeaseLost], None]) -> None:
        return None

    async def room(self) -> None:
        return None


def default_staging(url: str, part: str = "") -> Path:
    name = xxhash.xxh3_64_hexdigest(url.rstrip("/").encode()) + (f"-{part}" if part else "")
    return cache_dir("staging", name)
