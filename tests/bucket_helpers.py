"""The bucket the `--output-dir s3://...` tests write to (moto's S3 server on loopback),
its upload policy for tests, and the checks that read a run back from it."""

from __future__ import annotations

from collections import Counter

import boto3
import pytest

from regen.storage import open_store
from regen.storage.uploader import UploadPolicy

BUCKET = "runs"
URL = f"s3://{BUCKET}/exp/one"
# lease_settle: a lone run waits this long between writing its lease and reading it back (1 s
# by default, on every bucket run). The race it settles, two parts starting together, is
# test_bucket_lease's two-lease test, with its own settle of 1 s; moto on loopback reads back
# at once, so here it is only a wait.
FAST = UploadPolicy(heartbeat=0.5, poll=0.1, base_delay=0.1, max_delay=0.5, lease_settle=0.1)


@pytest.fixture
def bucket(s3_endpoint):
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket=BUCKET)
    return s3


def keys_in(s3, folder: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"exp/one/{folder}/").get("Contents", [])
    return sorted(o["Key"].rsplit("/", 1)[-1] for o in listed)


def assert_bucket_exactly_once(ids: list[str], samples: int = 1) -> list[dict]:
    """Every (id, sample) in exactly one committed line of the bucket's completions/errors."""
    reader = open_store(URL)
    records = list(reader.iter_records("completions"))
    records += [e for e in reader.iter_records("errors") if e.get("sample") is not None]
    seen = Counter((r["id"], r["sample"]) for r in records)
    dup = [k for k, n in seen.items() if n > 1]
    assert not dup, f"duplicated: {dup[:5]}"
    assert set(seen) == {(i, s) for i in ids for s in range(samples)}
    return records
