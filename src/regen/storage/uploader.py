"""A background thread that moves sealed shards from the staging directory to the bucket.

It watches the staging directory rather than being told about shards, so the generation run
needs no knowledge of it: whatever the shard writer sealed (a sidecar that matches its shard)
is uploaded, committed (see `shards`), and only then deleted locally. A failed upload is
retried with exponential backoff, forever: generation never stops for the bucket. When the
unsent bytes exceed the staging limit, `has_room` turns false and the run pauses dispatch
until uploads catch up. The manifest and progress snapshot are uploaded too (the progress at
most every `heartbeat` seconds: it is what `regen status` reads from the bucket), and with
each heartbeat the run's lease on its part is renewed (`lease`); a lease another process took
ends the thread, and the run stops.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from regen.errors import StorageError
from regen.format.layout import OutputLayout
from regen.format.sessions import with_sessions_of
from regen.format.sidecar import read_sidecar, sidecar_path
from regen.jsonio import dumps_pretty
from regen.storage.bucket import Bucket
from regen.storage.lease import LeaseLost
from regen.storage.shards import KINDS, upload_shard

MANIFEST = "manifest.json"
MANIFEST_TRIES = 20  # conditional writes of the manifest before this pass gives up
MANIFEST_BACKOFF = 0.05  # seconds, times the attempt: parts racing spread apart

REPORT_EVERY = 60.0  # seconds between repeated "upload failed" events in one outage


@dataclass(frozen=True)
class UploadPolicy:
    staging_limit_bytes: int = 4 << 30
    heartbeat: float = 10.0  # seconds between progress uploads
    poll: float = 0.5  # seconds between looks at the staging directory
    base_delay: float = 1.0  # first retry after a failure; doubles up to max_delay
    max_delay: float = 60.0
    lease_stale_after: float = 120.0  # a lease not renewed for this long may be taken over
    lease_settle: float = 1.0  # seconds between writing a lease and reading it back
    lease_wait: bool = False  # wait for another holder's lease to expire, do not refuse


class Uploader:
    def __init__(
        self,
        layout: OutputLayout,
        bucket: Bucket,
        policy: UploadPolicy,
        event: Callable[[str], None],
        renew: Callable[[], None] = lambda: None,
        lost: Callable[[LeaseLost], None] = lambda err: None,
    ) -> None:
        self.layout, self.bucket, self.policy, self.event = layout, bucket, policy, event
        self.renew, self.lost = renew, lost
        self.uploaded = 0
        self.pending_bytes = 0
        self.failing_since: float | None = None
        self._room = threading.Event()
        self._room.set()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._sent_mtime: dict[str, float] = {}
        self._last_heartbeat = 0.0
        self._delay = policy.base_delay
        self._last_report = 0.0
        self._thread = threading.Thread(target=self._loop, name="regen-upload", daemon=True)
        self.crashed: BaseException | None = None

    # -- run side ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    @property
    def has_room(self) -> bool:
        return self._room.is_set()

    def finish(self, timeout: float) -> int:
        """Upload everything left, waiting up to `timeout`; returns the shards still local."""
        deadline = time.monotonic() + timeout
        self._idle.clear()
        while time.monotonic() < deadline and self._thread.is_alive():
            if self._idle.wait(timeout=0.2) and not self._sealed():
                break
            self._idle.clear()
        self._stop.set()
        self._thread.join(timeout=30)
        if self.crashed is not None:
            raise self.crashed
        try:
            self.push_small(force=True)
        except StorageError as err:
            self.event(f"final progress upload failed: {err.message}")
        return len(self._sealed())

    # -- the thread ----------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                ok = self._pass()
                self._idle.set()
                self._stop.wait(self.policy.poll if ok else self._delay)
        except BaseException as exc:  # a bug: kept and raised by finish(), never lost
            self.crashed = exc
            self._room.set()
            if isinstance(exc, LeaseLost):
                # At once, not at the next request's room(): requests already past it,
                # waiting for a slot, must not go out for a part another process now runs.
                self.lost(exc)

    def _pass(self) -> bool:
        """One sweep of the staging directory; False if an upload failed."""
        try:
            self.push_small(force=False)
            for kind, shard in self._sealed():
                if self._stop.is_set():
                    break
                self.push_small(force=False)  # a long queue of shards must not starve the lease
                if upload_shard(self.bucket, kind, shard):
                    _remove_local(shard)
                    self.uploaded += 1
        except StorageError as err:
            self._failed(err)
            return False
        finally:
            self._measure()
        if self.failing_since is not None:
            self.event(f"uploads to {self.bucket.url} work again")
        self.failing_since, self._delay = None, self.policy.base_delay
        return True

    def push_small(self, *, force: bool) -> None:
        """The manifest when it changed; the progress snapshot as a heartbeat."""
        now = time.monotonic()
        self._push_manifest(force)
        if force or now - self._last_heartbeat >= self.policy.heartbeat:
            self.renew()
            self._push_if_changed(self.layout.progress, self.layout.progress.name)
            self._last_heartbeat = now

    def _push_manifest(self, force: bool) -> None:
        """The manifest, with the sessions other parts of the run put in the bucket's copy
        (each part adds its own session; no put may drop the others'): read with its ETag,
        merged, and put only if the bucket's copy is still the one read. A part that lost
        the race to another reads the new copy and merges again."""
        path = self.layout.manifest
        try:
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            return
        if not force and self._sent_mtime.get(MANIFEST) == mtime:
            return
        ours = orjson.loads(path.read_bytes())
        for attempt in range(MANIFEST_TRIES):
            theirs = self.bucket.read_versioned(MANIFEST)
            copy = orjson.loads(theirs.data) if theirs.data else None
            merged = with_sessions_of(ours, copy)
            if self.bucket.put_if_unchanged(MANIFEST, dumps_pretty(merged), theirs):
                self._sent_mtime[MANIFEST] = mtime
                return
            # another part put it since we read it: back off a little, unlike the others
            time.sleep(random.uniform(0, MANIFEST_BACKOFF * (attempt + 1)))
        raise StorageError(
            f"{self.bucket.url_of(MANIFEST)} changed under every one of {MANIFEST_TRIES} "
            "conditional writes (other parts of the run writing it)",
            hint="it is retried with the next upload; many parts starting at once settle",
        )

    def _push_if_changed(self, path: Path, name: str) -> None:
        try:
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            return
        if self._sent_mtime.get(name) != mtime:
            self.bucket.put_bytes(name, path.read_bytes())
            self._sent_mtime[name] = mtime

    def _sealed(self) -> list[tuple[str, Path]]:
        out = []
        for kind in KINDS:
            for shard in self.layout.shard_files(kind):
                try:
                    if read_sidecar(shard) is not None:
                        out.append((kind, shard))
                except FileNotFoundError:  # sealed into its compressed twin meanwhile
                    continue
        return out

    def _failed(self, err: StorageError) -> None:
        now = time.monotonic()
        first = self.failing_since is None
        self.failing_since = self.failing_since or now
        if first or now - self._last_report >= REPORT_EVERY:  # an outage is not a flood
            self._last_report = now
            self.event(
                f"upload failed, retrying in {self._delay:.0f}s "
                f"({self.pending_bytes / 1e6:.1f} MB waiting in staging): {err.message}"
            )
        self._delay = min(self._delay * 2, self.policy.max_delay)

    def _measure(self) -> None:
        total = 0
        for kind in KINDS:
            for shard in self.layout.shard_files(kind):
                try:
                    total += shard.stat().st_size
                except FileNotFoundError:
                    continue
        self.pending_bytes = total
        full = total > self.policy.staging_limit_bytes
        if full and self._room.is_set():
            down = 0 if self.failing_since is None else time.monotonic() - self.failing_since
            self._room.clear()
            self.event(
                f"staging is full ({total / 1e6:.1f} MB not yet uploaded; uploads failing for "
                f"{down:.0f}s): dispatch paused until the bucket takes them"
            )
        elif not full and not self._room.is_set():
            self._room.set()
            self.event("staging has room again: dispatch resumed")


def _remove_local(shard: Path) -> None:
    """Data first: a sidecar left without its shard is ignored by every reader."""
    shard.unlink(missing_ok=True)
    sidecar_path(shard).unlink(missing_ok=True)
