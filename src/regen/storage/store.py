"""Where a generation run's files go: a local directory, or a bucket through local staging.

The run writes into `store.layout` and never knows which one it has. A `BucketStore` stages
in a local directory, uploads sealed shards behind the run's back (`uploader`), and on start
pulls the ledger from the bucket, so a brand-new machine with an empty disk resumes where the
last one stopped. The hooks the run calls: `committed()` (ledger entries already in the
bucket), `start()` (after the ledger scan), `room()` (before each request: waits while staging
is full), `seal_after` (shard age limit), and leaving the context (final uploads).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import xxhash

from regen.errors import UNWRITABLE_ERRNOS, ConfigError, OutputError, StorageError
from regen.jsonio import ZST_SUFFIX
from regen.run.layout import COMPLETIONS, ERRORS, OutputLayout
from regen.run.ledger import RemoteShard
from regen.run.sidecar import SIDECAR_SUFFIX, ShardKeys
from regen.run.writer import written_by
from regen.scale.partition import Part
from regen.storage.bucket import Bucket, is_url
from regen.storage.lease import Lease, LeaseLost
from regen.storage.shards import KINDS, adopt, list_kind, read_records, read_sidecars
from regen.storage.staging import drop_superseded
from regen.storage.uploader import Uploader, UploadPolicy

RETRIED = "errors-retried"
log = logging.getLogger("regen.storage")


class LocalStore:
    """A plain output directory: the run's files are already where they belong."""

    seal_after: float | None = None

    def __init__(self, output_dir: str | Path, part: str = "") -> None:
        self.layout = OutputLayout.at(output_dir, part)
        try:
            self.layout.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in UNWRITABLE_ERRNOS:  # read-only or full: the fix is the storage's
                raise OutputError.writing(self.layout.root, exc) from exc
            root = self.layout.root
            raise ConfigError(f"cannot create --output-dir {root}: {exc.strerror}") from exc

    def committed(self) -> Iterator[RemoteShard]:
        return iter(())

    def start(self, event: Callable[[str], None]) -> None:
        return None

    async def room(self) -> None:
        return None

    def __enter__(self) -> LocalStore:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class BucketStore:
    def __init__(
        self,
        url: str,
        staging: Path,
        *,
        upload_interval: float,
        policy: UploadPolicy,
        retry_errors: bool = False,
        finish_timeout: float = 600.0,
        part: str = "",
    ) -> None:
        self.bucket = Bucket(url)
        root = staging.expanduser().resolve()
        self.layout = OutputLayout(root, label=self.bucket.url, part=part)
        try:
            self.layout.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create --staging-dir {staging}: {exc.strerror}") from exc
        self.seal_after = upload_interval
        self.policy, self.retry_errors = policy, retry_errors
        self.finish_timeout = finish_timeout
        self.uploader: Uploader | None = None
        self.lease = Lease(
            self.bucket, part, policy.lease_stale_after, policy.lease_settle, policy.lease_wait
        )

    def __enter__(self) -> BucketStore:
        """Under the run lock: take this part's lease (no other machine runs it), bring the
        bucket's manifest into staging and settle shards whose writer died between putting
        the data and committing it."""
        self.lease.acquire()
        try:
            self._settle()
        except BaseException:
            self.lease.release()
            raise
        return self

    def _settle(self) -> None:
        manifest = self.bucket.get_bytes("manifest.json")
        if manifest is not None:
            self.layout.manifest.write_bytes(manifest)
        if self.retry_errors:
            self._set_errors_aside()
        local = {_stem(p.name) for kind in KINDS for p in self.layout.shard_files(kind)}
        self._remote: dict[str, list[str]] = {}
        for kind in KINDS:
            listing = list_kind(self.bucket, kind)
            for name in listing.uncommitted:
                if _stem(name) not in local:
                    adopt(self.bucket, kind, name)
            listing = list_kind(self.bucket, kind)
            self._remote[kind] = [n for n in listing.committed if _stem(n) not in local]
        drop_superseded(self.layout, self.bucket, self._remote)

    def committed(self) -> Iterator[RemoteShard]:
        for name, sidecar in read_sidecars(self.bucket, COMPLETIONS, self._remote[COMPLETIONS]):
            yield COMPLETIONS, name, ShardKeys.from_json(sidecar)
        for name in self._remote[ERRORS]:
            yield ERRORS, name, list(read_records(self.bucket, ERRORS, name))

    def start(self, event: Callable[[str], None]) -> None:
        """Begin uploading; the manifest goes up first, so bad credentials fail right here."""
        loop = asyncio.get_running_loop()

        def threadsafe(text: str) -> None:
            if loop.is_closed():
                event(text)
            else:
                loop.call_soon_threadsafe(event, text)

        uploader = Uploader(self.layout, self.bucket, self.policy, threadsafe, self.lease.renew)
        uploader.push_small(force=True)
        uploader.start()
        self.uploader = uploader

    async def room(self) -> None:
        """Wait while staging is full; raise LeaseLost once another process runs our part."""
        while self.uploader is not None and not self.uploader.has_room:
            await asyncio.sleep(0.2)
        if self.uploader is not None and isinstance(self.uploader.crashed, LeaseLost):
            raise self.uploader.crashed

    def __exit__(self, exc_type: object, *rest: object) -> None:
        try:
            self._finish(exc_type)
        finally:
            try:
                self.lease.release()
            except StorageError as err:  # it expires by itself; the run's own error matters more
                log.warning("could not release %s: %s", self.lease.name, err.message)

    def _finish(self, exc_type: object) -> None:
        if self.uploader is None:
            return
        if isinstance(self.uploader.crashed, LeaseLost):
            return  # staged shards stay: the other process may have made them too
        self.uploader.event = lambda text: None  # the run's loop is gone by now
        left = self.uploader.finish(self.finish_timeout)
        if left and exc_type is None:
            raise StorageError(
                f"{left} shard(s) could not be uploaded to {self.bucket.url} within "
                f"{self.finish_timeout:.0f}s; they are safe in {self.layout.root}",
                hint="run the same command again (same --staging-dir) once the bucket is "
                "reachable: it uploads them first",
            )

    def _set_errors_aside(self) -> None:
        """--retry-errors: this part's committed error shards move to errors-retried/."""
        part = Part.from_name(self.layout.part)
        listing = list_kind(self.bucket, ERRORS)
        for name in [*listing.committed, *listing.uncommitted]:
            records = lambda name=name: read_records(self.bucket, ERRORS, name)  # noqa: E731
            if not written_by(name, part, records):
                continue
            self.bucket.move(f"{ERRORS}/{name}", f"{RETRIED}/{name}")
            if name in listing.committed:  # data first: a sidecar alone is ignored by readers
                side = name + SIDECAR_SUFFIX
                self.bucket.move(f"{ERRORS}/{side}", f"{RETRIED}/{side}")


Store = LocalStore | BucketStore


def _stem(name: str) -> str:
    """A shard's identity: its name without the compression or sidecar suffix."""
    for suffix in (SIDECAR_SUFFIX, ZST_SUFFIX):
        name = name.removesuffix(suffix)
    return name


def default_staging(url: str, part: str = "") -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = xxhash.xxh3_64_hexdigest(url.rstrip("/").encode()) + (f"-{part}" if part else "")
    return cache / "regen" / "staging" / name


def open_store(
    output_dir: str | Path,
    *,
    staging_dir: Path | None = None,
    upload_interval: float = 300.0,
    policy: UploadPolicy | None = None,
    retry_errors: bool = False,
    part: str = "",
) -> LocalStore | BucketStore:
    """`part`: with --shard, the part's name: its own progress file, lock and staging."""
    if not is_url(output_dir):
        return LocalStore(output_dir, part)
    url = str(output_dir)
    if url.startswith("file://"):
        return LocalStore(url.removeprefix("file://"), part)
    return BucketStore(
        url,
        staging_dir or default_staging(url, part),
        part=part,
        upload_interval=upload_interval,
        policy=policy or UploadPolicy(),
        retry_errors=retry_errors,
    )
