"""Parts of one run that start together, on disk or in a bucket, each keep their session in
the run's manifest: no lost write when they put it at the same instant, a conditional put
on a stale read refused, and a store without conditional writes still served."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest


def _record_session(path: Path, pid: int) -> None:
    from regen.format.manifest import InputFingerprint, check_and_record

    check_and_record(
        path,
        config={"prompts": "p.jsonl", "sampling": {}},
        input_fp=InputFingerprint(1, "x", 1),
        allow_changed_input=False,
        allow_changed_sampling=False,
        command=("part", str(pid)),
    )


def test_parts_starting_together_each_keep_their_session(tmp_path, monkeypatch):
    """Two parts read the directory's manifest, add their session and write it back at the
    same moment: the read and the write are one step, so neither session is lost."""
    import threading

    from regen.format import manifest

    read = manifest.read_manifest

    def slow_read(path: Path):
        found = read(path)
        time.sleep(0.3)  # both parts have read before either writes, unless they take turns
        return found

    monkeypatch.setattr(manifest, "read_manifest", slow_read)
    parts = [
        threading.Thread(target=_record_session, args=(tmp_path / "manifest.json", k))
        for k in range(2)
    ]
    for part in parts:
        part.start()
    for part in parts:
        part.join(timeout=10)
    sessions = manifest.read_manifest(tmp_path / "manifest.json")["sessions"]
    assert sorted(s["command"][1] for s in sessions) == ["0", "1"]


def test_parts_of_a_bucket_run_merge_their_sessions_into_its_manifest(tmp_path, s3_endpoint):
    """Two parts on two machines each pulled the bucket's manifest (none yet), added their
    session and upload it: the second upload keeps the first one's session."""
    import boto3

    from regen.format.layout import OutputLayout
    from regen.storage.bucket import Bucket
    from regen.storage.uploader import Uploader, UploadPolicy

    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="runs")
    bucket = Bucket("s3://runs/exp")
    uploaders = []
    for k in range(2):
        layout = OutputLayout.at(tmp_path / f"staging-{k}")
        layout.root.mkdir()
        _record_session(layout.manifest, k)
        uploaders.append(Uploader(layout, bucket, UploadPolicy(), lambda text: None))
    for uploader in uploaders:
        uploader.push_small(force=True)
    sessions = orjson.loads(bucket.get_bytes("manifest.json"))["sessions"]
    assert sorted(s["command"][1] for s in sessions) == ["0", "1"]


def _parts_racing(tmp_path, parts: int):
    """`parts` uploaders, each with its own connection to the bucket, whose first read of
    the manifest waits for all the others' (the instant two parts start together): every
    one then puts a manifest made from the same copy."""
    import threading

    from regen.format.layout import OutputLayout
    from regen.storage.bucket import Bucket
    from regen.storage.uploader import Uploader, UploadPolicy

    together = threading.Barrier(parts, timeout=20)
    uploaders = []
    for k in range(parts):
        bucket = Bucket("s3://runs/exp")
        read, first = bucket.get_bytes, [True]

        def get_bytes(name, read=read, first=first):
            found = read(name)
            if name == "manifest.json" and first[0]:
                first[0] = False
                together.wait()  # every part has read before any writes
            return found

        bucket.get_bytes = get_bytes
        layout = OutputLayout.at(tmp_path / f"staging-{k}")
        layout.root.mkdir()
        _record_session(layout.manifest, k)
        uploaders.append(Uploader(layout, bucket, UploadPolicy(), lambda text: None))
    return uploaders


@pytest.mark.parametrize("earlier", [False, True], ids=["first-write", "rewrite"])
def test_parts_putting_the_bucket_manifest_at_the_same_instant_lose_no_session(
    tmp_path, s3_endpoint, earlier
):
    """Three parts read the bucket's manifest at once (none yet, or one an earlier session
    wrote) and put theirs: the puts are conditional (If-None-Match: *, If-Match on the ETag
    read; moto's S3 server checks both), so the losers read again and merge, and every
    part's session is there, the earlier one's too."""
    import threading

    import boto3

    from regen.storage.bucket import Bucket

    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="runs")
    expected = ["0", "1", "2"]
    if earlier:
        seed = tmp_path / "earlier.json"
        _record_session(seed, 9)
        Bucket("s3://runs/exp").put_bytes("manifest.json", seed.read_bytes())
        expected.append("9")
    threads = [
        threading.Thread(target=u.push_small, kwargs={"force": True})
        for u in _parts_racing(tmp_path, 3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    sessions = orjson.loads(Bucket("s3://runs/exp").get_bytes("manifest.json"))["sessions"]
    assert sorted(s["command"][1] for s in sessions) == expected


def test_a_conditional_put_on_a_stale_read_is_refused_and_says_so(s3_endpoint):
    import boto3

    from regen.storage.bucket import Bucket

    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="runs")
    bucket = Bucket("s3://runs/exp")
    none_yet = bucket.read_versioned("m.json")
    assert none_yet.data is None and none_yet.etag is None
    assert bucket.put_if_unchanged("m.json", b"first", none_yet)
    assert not bucket.put_if_unchanged("m.json", b"second", none_yet)  # it exists now
    read = bucket.read_versioned("m.json")
    assert read.data == b"first" and read.etag
    bucket.put_bytes("m.json", b"someone else")
    assert not bucket.put_if_unchanged("m.json", b"third", read)  # changed since read
    assert bucket.get_bytes("m.json") == b"someone else"
    assert bucket.put_if_unchanged("m.json", b"fourth", bucket.read_versioned("m.json"))
    assert bucket.get_bytes("m.json") == b"fourth"


def test_a_store_without_conditional_writes_still_takes_the_manifest(s3_endpoint, monkeypatch):
    """An S3-compatible store that answers the condition headers 501 (a stand-in in front of
    moto): the put goes in plainly, once said in the log, and later puts skip the headers."""
    import boto3

    from regen.storage.bucket import Bucket
    from regen.testing.cut_proxy import CutProxy

    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="runs")
    proxy = CutProxy(s3_endpoint, rules=[("PUT", "m.json", "no_conditions")]).start()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        bucket = Bucket("s3://runs/exp")
        assert bucket.put_if_unchanged("m.json", b"first", bucket.read_versioned("m.json"))
        assert not bucket.conditional and bucket.get_bytes("m.json") == b"first"
        assert bucket.put_if_unchanged("m.json", b"second", bucket.read_versioned("m.json"))
        assert bucket.get_bytes("m.json") == b"second"
        puts = [seen for seen in proxy.seen if seen[0] == "PUT"]
        assert len(puts) == 3  # refused once, then plain twice
    finally:
        proxy.stop()
