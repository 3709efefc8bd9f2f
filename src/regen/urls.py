"""Locations given as URLs (`s3://bucket/prefix`, `gs://`, `file://`, ...) and the errors of the
filesystems behind them, mapped to regen's own in one place. The base of the house: the
readers of prompt files (`jsonio`) and the run's storage (`storage`) both use it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from regen.errors import StorageError


def is_url(location: str | Path) -> bool:
    return "://" in str(location)


def _transient_errors() -> tuple[type[BaseException], ...]:
    """The exception types a storage call can raise for reasons outside regen: network,
    permissions, missing objects. Anything else is a bug and keeps its traceback."""
    found: list[type[BaseException]] = [OSError, TimeoutError]
    with contextlib.suppress(ImportError):
        import botocore.exceptions

        found += [botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError]
    with contextlib.suppress(ImportError):
        import aiohttp

        found.append(aiohttp.ClientError)
    return tuple(found)


@contextlib.contextmanager
def mapped(what: str, *, missing_ok: bool = False) -> Iterator[None]:
    """Turn a backend's error into a StorageError that names the action (never a secret).
    `missing_ok`: a FileNotFoundError (no such object) is the caller's answer, not an error."""
    try:
        yield
    except FileNotFoundError:
        if missing_ok:
            raise
        raise StorageError(
            f"{what}: the bucket or folder does not exist",
            hint="create the bucket first, or check the URL and AWS_ENDPOINT_URL",
        ) from None
    except _transient_errors() as exc:
        raise StorageError(
            f"{what}: {type(exc).__name__}: {exc}",
            hint="check the bucket name, AWS_ENDPOINT_URL and the credentials in your "
            "environment or profile",
        ) from exc
