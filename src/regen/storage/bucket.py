"""One run's prefix in object storage (or any fsspec URL), with errors mapped in one place.

Credentials come from each backend's standard chain (for S3: `AWS_*` variables, profiles,
instance roles) and the endpoint from `AWS_ENDPOINT_URL` for S3-compatible stores; regen never
reads, stores or prints them. Object stores make a PUT visible only once complete, so a file is
put in place directly there; on other filesystems (`file://`, mounts) it is written aside and
renamed, so that readers never see half a file.

An object several writers rewrite (the manifest, which every part of a run adds its session
to) is written on condition where the store has conditional writes (S3 and what speaks its
API: `If-Match` on the ETag read, `If-None-Match: *` to create): a writer that lost the
race is told so, reads again and merges, instead of putting over the other's entry.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.urls import mapped

log = logging.getLogger(__name__)

ATOMIC_PUT = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "r2", "oss"}
CONDITIONAL_PUT = {"s3", "s3a"}  # PutObject with If-Match / If-None-Match (s3fs passes them)
LOST_RACE = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
NOT_SUPPORTED = {"NotImplemented", "501"}  # a store that refuses the condition headers
# Seconds: a bucket that does not answer is retried by the uploader, never waited on forever.
S3_CLIENT = {"connect_timeout": 5, "read_timeout": 60, "retries": {"max_attempts": 2}}


class Bucket:
    """Files under one URL prefix, named by their path relative to it (`completions/x`)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        protocol = self.url.split("://", 1)[0]
        import fsspec  # here, not at the top: local runs never pay for its import

        options: dict[str, Any] = {"skip_instance_cache": True}
        if protocol in ("s3", "s3a"):
            options |= {"use_listings_cache": False, "config_kwargs": S3_CLIENT}
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self.url, **options)
        except (ImportError, ValueError) as exc:
            raise ConfigError(
                f"cannot open {self.url}: {exc}",
                hint="install the filesystem's package (for s3://: pip install 'regen[s3]')",
            ) from exc
        self.root = self.root.rstrip("/")
        self.atomic_put = protocol in ATOMIC_PUT
        self.conditional = protocol in CONDITIONAL_PUT

    def where(self, name: str) -> str:
        return f"{self.root}/{name}"

    def url_of(self, name: str) -> str:
        return f"{self.url}/{name}"

    def put_file(self, local: Path, name: str) -> None:
        with mapped(f"upload of {self.url_of(name)}"):
            if self.atomic_put:
                self.fs.put_file(str(local), self.where(name))
                return
            self.fs.makedirs(self.where(name).rsplit("/", 1)[0], exist_ok=True)
            tmp = self.where(_hidden_tmp(name))
            self.fs.put_file(str(local), tmp)
            self.fs.mv(tmp, self.where(name))

    def put_bytes(self, name: str, data: bytes) -> None:
        with mapped(f"write of {self.url_of(name)}"):
            if self.atomic_put:
                self.fs.pipe_file(self.where(name), data)
                return
            self.fs.makedirs(self.where(name).rsplit("/", 1)[0], exist_ok=True)
            tmp = self.where(_hidden_tmp(name))
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, self.where(name))

    def get_bytes(self, name: str) -> bytes | None:
        """The object's bytes, or None if it does not exist."""
        try:
            with mapped(f"read of {self.url_of(name)}", missing_ok=True):
                return self.fs.cat_file(self.where(name))
        except FileNotFoundError:
            return None

    def read_versioned(self, name: str) -> Versioned:
        """The object's bytes and the version to write it back on (`put_if_unchanged`).
        The ETag is read before the bytes: a change in between makes the conditional put
        fail and the caller read again, never pass over the change."""
        for _ in range(3):  # created or deleted between the two reads: read both again
            tag = self._etag(name) if self.conditional else None
            data = self.get_bytes(name)
            if not self.conditional or (tag is None) == (data is None):
                return Versioned(data, tag)
        return Versioned(data, tag if data is not None else None)

    def put_if_unchanged(self, name: str, data: bytes, read: Versioned) -> bool:
        """Put `data` only if the object is still the version `read` saw (If-Match its ETag;
        If-None-Match: * where there was none). False when another writer put it in between
        (412, or 409 for a write racing ours). A store without conditional writes gets a
        plain put (True): there the caller's merge is the only guard."""
        if not self.conditional:
            self.put_bytes(name, data)
            return True
        condition = {"IfMatch": read.etag} if read.etag is not None else {"mode": "create"}
        with mapped(f"write of {self.url_of(name)}"):
            try:
                self.fs.pipe_file(self.where(name), data, **condition)
            except OSError as exc:
                # deleted since it was read (If-Match on nothing: 404) is a lost race too
                if _lost_race(exc) or isinstance(exc, FileNotFoundError):
                    return False
                if not _error_code(exc) & NOT_SUPPORTED:
                    raise
                # an S3-compatible store without conditional writes: the merge alone guards
                log.warning("%s has no conditional writes (%s)", self.url, _error_code(exc))
                self.conditional = False
                self.fs.pipe_file(self.where(name), data)
        return True

    def _etag(self, name: str) -> str | None:
        try:
            with mapped(f"stat of {self.url_of(name)}", missing_ok=True):
                return self.fs.info(self.where(name), refresh=True).get("ETag") or None
        except FileNotFoundError:
            return None

    def get_many(self, names: list[str]) -> dict[str, bytes]:
        """Several objects at once (fetched concurrently where the backend can)."""
        if not names:
            return {}
        with mapped(f"read of {len(names)} objects under {self.url}"):
            got = self.fs.cat([self.where(n) for n in names], on_error="raise")
        return {n: got[self.where(n)] for n in names}

    def list(self, folder: str) -> dict[str, int]:
        """{file name: size} directly under `folder`; hidden (dot) files are left out."""
        try:
            with mapped(f"listing of {self.url_of(folder)}", missing_ok=True):
                entries = self.fs.ls(self.where(folder), detail=True)
        except FileNotFoundError:
            return {}
        out = {}
        for entry in entries:
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if entry.get("type") == "file" and not name.startswith("."):
                out[name] = int(entry.get("size") or 0)
        return out

    def find(self, folder: str) -> dict[str, int]:
        """{path relative to `folder`: size} of every file below it, at any depth."""
        try:
            with mapped(f"listing of {self.url_of(folder)}", missing_ok=True):
                found = self.fs.find(self.where(folder), detail=True)
        except FileNotFoundError:
            return {}
        base = self.where(folder).rstrip("/") + "/"
        return {
            path.removeprefix(base): int(info.get("size") or 0)
            for path, info in found.items()
            if path.startswith(base) and not path.rsplit("/", 1)[-1].startswith(".")
        }

    def size(self, name: str) -> int | None:
        try:
            with mapped(f"stat of {self.url_of(name)}", missing_ok=True):
                return int(self.fs.info(self.where(name))["size"])
        except FileNotFoundError:
            return None

    def delete(self, name: str) -> None:
        with (
            contextlib.suppress(FileNotFoundError),
            mapped(f"delete of {self.url_of(name)}", missing_ok=True),
        ):
            self.fs.rm_file(self.where(name))

    def move(self, name: str, new_name: str) -> None:
        with mapped(f"move of {self.url_of(name)}"):
            self.fs.mv(self.where(name), self.where(new_name))


@dataclass(frozen=True)
class Versioned:
    """An object as read for a conditional write: its bytes (None: there was none) and its
    ETag (None: none, or a store without conditional writes)."""

    data: bytes | None
    etag: str | None


def _lost_race(exc: BaseException) -> bool:
    """Whether a failed conditional put failed on its condition: s3fs maps S3's 412 to
    FileExistsError (If-None-Match) or an EINVAL OSError (If-Match), the ClientError kept
    as the cause with its code."""
    return isinstance(exc, FileExistsError) or bool(_error_code(exc) & LOST_RACE)


def _error_code(exc: BaseException) -> set[str]:
    """S3's error code and HTTP status of a failed call, from the ClientError s3fs keeps."""
    response = getattr(exc.__cause__, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = str(response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return {code, status} - {""}


def _hidden_tmp(name: str) -> str:
    import os

    folder, _, base = name.rpartition("/")
    hidden = f".{base}.tmp-{os.getpid()}"
    return f"{folder}/{hidden}" if folder else hidden
