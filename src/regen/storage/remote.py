"""A run in a bucket prefix (any fsspec URL), written through local staging.

Only committed shards count (see `shards`): a reader never sees a shard whose upload is still
in flight, and never counts a record twice. A writer stages in a local directory, uploads
sealed shards behind the run's back (`uploader`), and on entering pulls the ledger from the
bucket, so a brand-new machine with an empty disk resumes where the last one stopped. A lease
in the bucket (`lease`) keeps two machines off one part; the staging directory has its own
run lock, as a local run does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from regen.errors import StorageError
from regen.format.layout import COMPLETIONS, ERRORS, OutputLayout, is_progress
from regen.format.names import written_by
from regen.format.sidecar import SIDECAR_SUFFIX, RemoteShard, ShardKeys
from regen.format.state import heartbeat_stale, is_final
from regen.jsonio import ZST_SUFFIX
from regen.output_place import make_folder
from regen.storage.bucket import Bucket
from regen.storage.lease import Lease, LeaseLost
from regen.storage.local import set_aside_local
from regen.storage.lock import RunLock
from regen.storage.shards import (
    KINDS,
    adopt,
    list_kind,
    read_lines,
    read_numbered_lines,
    read_records,
    read_sidecars,
    sidecar_count,
)
from regen.storage.staging import drop_superseded
from regen.storage.store import Liveness, Store, StoreOptions
from regen.storage.uploader import Uploader

RETRIED = "errors-retried"
log = logging.getLogger("regen.storage")


class BucketStore(Store):
    def __init__(
        self, url: str, staging: Path, options: StoreOptions, finish_timeout: float = 600.0
    ) -> None:
        self.bucket = Bucket(url)
        self.options = options
        part = options.part.name
        self.layout = OutputLayout(staging.expanduser().resolve(), label=self.bucket.url, part=part)
        self.seal_after = options.upload_interval
        self.finish_timeout = finish_timeout
        self.uploader: Uploader | None = None
        policy = options.upload
        self.lease = Lease(
            self.bucket, part, policy.lease_stale_after, policy.lease_settle, policy.lease_wait
        )
        self._lock = RunLock(self.layout.lock)
        self._remote: dict[str, list[str]] = {kind: [] for kind in KINDS}

    # -- reading -------------------------------------------------------------------------
    def read_json(self, name: str) -> Any:
        data = self.bucket.get_bytes(name)
        return None if data is None else orjson.loads(data)

    def part_progress(self) -> dict[str, dict]:
        names = sorted(n for n in self.bucket.list("") if is_progress(n) and n != "progress.json")
        return {n: self.read_json(n) for n in names}

    def shard_names(self, kind: str) -> list[str]:
        return list(list_kind(self.bucket, kind).committed)

    def iter_records(self, kind: str = COMPLETIONS) -> Iterator[dict]:
        for name in self.shard_names(kind):
            yield from read_records(self.bucket, kind, name)

    def iter_lines(self, kind: str = COMPLETIONS) -> Iterator[bytes]:
        for name in self.shard_names(kind):
            yield from read_lines(self.bucket, kind, name)

    def iter_numbered_lines(self, kind: str = COMPLETIONS) -> Iterator[tuple[str, int, bytes]]:
        for name in self.shard_names(kind):
            shard = self.bucket.url_of(f"{kind}/{name}")
            for number, line in read_numbered_lines(self.bucket, kind, name):
                yield shard, number, line

    def count(self, kind: str) -> int:
        names = self.shard_names(kind)
        return sum(sidecar_count(sidecar) for _, sidecar in read_sidecars(self.bucket, kind, names))

    def liveness(self, progress: dict | None) -> Liveness:
        """Only the heartbeat (uploaded every 10 s) can tell: the writer is on some machine."""
        age = time.time() - progress["updated_unix"] if progress else None
        state = (progress or {}).get("state")
        how = (
            f"heartbeat {age:.0f}s ago from {progress['host']}" if progress else "no heartbeat yet"
        )
        return {
            "alive": progress is not None and not heartbeat_stale(age) and not is_final(state),
            "pid": (progress or {}).get("pid"),
            "host": (progress or {}).get("host"),
            "how": how,
            "last_update_s_ago": None if age is None else round(age, 1),
            "state": state,
        }

    # -- writing -------------------------------------------------------------------------
    def __enter__(self) -> BucketStore:
        """Take the staging directory's lock and this part's lease (no other machine runs
        it), bring the bucket's manifest into staging and settle shards whose writer died
        between putting the data and committing it."""
        make_folder(self.layout.root, "--staging-dir")
        self._lock.acquire()
        try:
            self.lease.acquire()
            try:
                self._settle()
            except BaseException:
                self.lease.release()
                raise
        except BaseException:
            self._lock.release()
            raise
        return self

    def _settle(self) -> None:
        manifest = self.bucket.get_bytes("manifest.json")
        if manifest is not None:
            self.layout.manifest.write_bytes(manifest)
        local = {_stem(p.name) for kind in KINDS for p in self.layout.shard_files(kind)}
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

    def set_errors_aside(self) -> int:
        """This part's error shards, in the bucket (committed or not) and in staging."""
        part = self.options.part
        listing = list_kind(self.bucket, ERRORS)
        moved = 0
        for name in [*listing.committed, *listing.uncommitted]:
            records = lambda name=name: read_records(self.bucket, ERRORS, name)  # noqa: E731
            if not written_by(name, part, records):
                continue
            self.bucket.move(f"{ERRORS}/{name}", f"{RETRIED}/{name}")
            if name in listing.committed:  # data first: a sidecar alone is ignored by readers
                side = name + SIDECAR_SUFFIX
                self.bucket.move(f"{ERRORS}/{side}", f"{RETRIED}/{side}")
            moved += 1
        gone = set(self._remote[ERRORS]) - set(self.shard_names(ERRORS))
        self._remote[ERRORS] = [n for n in self._remote[ERRORS] if n not in gone]
        return moved + set_aside_local(self.layout, self.options)

    def start(self, event: Callable[[str], None], lost: Callable[[LeaseLost], None]) -> None:
        """Begin uploading; the manifest goes up first, so bad credentials fail right here."""
        loop = asyncio.get_running_loop()

        def threadsafe(call: Callable[[Any], None]) -> Callable[[Any], None]:
            def from_thread(arg: Any) -> None:
                if loop.is_closed():
                    call(arg)
                else:
                    loop.call_soon_threadsafe(call, arg)

            return from_thread

        policy = self.options.upload
        uploader = Uploader(
            self.layout,
            self.bucket,
            policy=policy,
            event=threadsafe(event),
            renew=self.lease.renew,
            lost=threadsafe(lost),
        )
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
            finally:
                self._lock.release()

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


def _stem(name: str) -> str:
    """A shard's identity: its name without the compression or sidecar suffix."""
    for suffix in (SIDECAR_SUFFIX, ZST_SUFFIX):
        name = name.removesuffix(suffix)
    return name
