"""A bucket run under faults: real `regen generate` processes killed with SIGKILL at the
three dangerous moments, uploads cut by a proxy in front of moto's S3 server, and a full
staging directory waiting for the bucket to come back."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bucket_helpers import FAST, URL, assert_bucket_exactly_once, keys_in
from bucket_helpers import bucket as bucket  # the fixture
from gen_helpers import run, write_prompts
from regen.storage.uploader import UploadPolicy
from regen.testing.cut_proxy import CutProxy
from regen.testing.fake_server import Behaviour, FakeServer
from waiting import kill_when, wait_until


# -- kill -9 at the three dangerous moments ---------------------------------------------------
def regen_process(prompts: Path, staging: Path, server: str, endpoint: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(prompts),
        "--output-dir",
        URL,
        "--staging-dir",
        str(staging),
        "--servers",
        server,
        "--concurrency",
        "4",
        "--upload-interval",
        "0.3",
        "--display",
        "none",
    ]
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint}
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def sealed_in(staging: Path) -> int:
    return len(list((staging / "completions").glob("*.keys")))


@pytest.fixture
def proxy(s3_endpoint):
    started = CutProxy(s3_endpoint).start()
    yield started
    started.stop()


@pytest.fixture
def slow_server(fake_server):
    return fake_server(Behaviour(slots=4, seconds_per_token=0.02))  # 8 tokens: 0.16 s each


def finish(prompts: Path, staging: Path, server: FakeServer):
    """The run to its end after a kill: the server was slow for the kill to land at its moment,
    and need not be for what is left."""
    server.behaviour.seconds_per_token = 0.002
    return run(prompts, URL, [server.url], staging_dir=staging, upload=FAST)


@pytest.mark.parametrize("resume_on", ["same machine", "new machine"])
def test_killed_between_writing_and_uploading(
    tmp_path, slow_server, bucket, proxy, s3_endpoint, resume_on
):
    ids = write_prompts(tmp_path / "p.jsonl", 60)
    proxy.rules = [("PUT", "/completions/", "refuse")]  # shards stay in staging
    staging = tmp_path / "a"
    proc = regen_process(tmp_path / "p.jsonl", staging, slow_server.url, proxy.url)
    kill_when(
        proc, lambda: sealed_in(staging) >= 2, 30, "two sealed shards in staging", interval=0.05
    )
    assert keys_in(bucket, "completions") == []
    asked = len(slow_server.requests)
    again = finish(
        tmp_path / "p.jsonl",
        staging if resume_on == "same machine" else tmp_path / "b",
        slow_server,
    )
    assert again.exit_code == 0
    assert_bucket_exactly_once(ids)
    if resume_on == "same machine":  # the staged shards were uploaded, not redone
        assert again.stats.finished_before >= 2
        assert len(slow_server.requests) - asked == 60 - again.stats.finished_before


def test_killed_in_the_middle_of_an_upload(tmp_path, slow_server, bucket, proxy, s3_endpoint):
    ids = write_prompts(tmp_path / "p.jsonl", 60)
    proxy.rules = [("PUT", "/completions/part-", "cut")]  # each shard upload is cut midway
    staging = tmp_path / "a"
    proc = regen_process(tmp_path / "p.jsonl", staging, slow_server.url, proxy.url)
    cuts = lambda: sum(1 for *_, action in proxy.seen if action == "cut")  # noqa: E731
    kill_when(proc, lambda: cuts() >= 3, 30, "three cut uploads", interval=0.05)
    assert not [k for k in keys_in(bucket, "completions") if k.endswith(".keys")]
    # A new machine: the cut uploads left nothing committed, so everything is redone once.
    assert finish(tmp_path / "p.jsonl", tmp_path / "b", slow_server).exit_code == 0
    assert_bucket_exactly_once(ids)
    # The old machine comes back: its staged copies are already in the bucket; none is added.
    assert finish(tmp_path / "p.jsonl", staging, slow_server).exit_code == 0
    assert_bucket_exactly_once(ids)


def test_cut_uploads_are_retried_and_never_stop_generation(
    tmp_path, slow_server, bucket, proxy, s3_endpoint, monkeypatch
):
    ids = write_prompts(tmp_path / "p.jsonl", 40)
    proxy.rules = [("PUT", "/completions/part-", "cut")]
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    with healed_after(proxy, "cut", 3):
        result = run(
            tmp_path / "p.jsonl",
            URL,
            [slow_server.url],
            staging_dir=tmp_path / "s",
            upload_interval=0.3,
            upload=FAST,
        )
    assert result.exit_code == 0
    assert faults(proxy, "cut") >= 3
    assert len(slow_server.requests) == 40  # generation went on while uploads failed
    assert_bucket_exactly_once(ids)


@pytest.mark.parametrize("resume_on", ["same machine", "new machine"])
def test_killed_after_the_upload_before_local_bookkeeping(
    tmp_path, slow_server, bucket, proxy, s3_endpoint, resume_on
):
    ids = write_prompts(tmp_path / "p.jsonl", 60)
    proxy.rules = [("PUT", ".keys", "hold")]  # the data lands, its commit lands, no answer
    staging = tmp_path / "a"
    proc = regen_process(tmp_path / "p.jsonl", staging, slow_server.url, proxy.url)
    held = lambda: any(a == "hold" for *_, a in proxy.seen)  # noqa: E731
    kill_when(
        proc,
        lambda: held() and keys_in(bucket, "completions"),
        30,
        "a committed upload",
        interval=0.05,
    )
    committed = [k for k in keys_in(bucket, "completions") if k.endswith(".keys")]
    assert len(committed) == 1 and (staging / "completions" / committed[0]).exists()
    again = finish(
        tmp_path / "p.jsonl",
        staging if resume_on == "same machine" else tmp_path / "b",
        slow_server,
    )
    assert again.exit_code == 0
    assert_bucket_exactly_once(ids)


def faults(proxy: CutProxy, action: str) -> int:
    return sum(1 for *_, a in proxy.seen if a == action)


@contextmanager
def healed_after(proxy: CutProxy, action: str, count: int, then=None) -> Iterator[None]:
    """The bucket comes back once `count` requests met `action` (by event, not by clock:
    a loaded machine may take seconds to start the run); `then()` runs at that moment."""

    def heal() -> None:
        try:
            wait_until(
                lambda: faults(proxy, action) >= count,
                120,
                f"{count} requests that met {action!r}",
                interval=0.05,
            )
        finally:
            if then is not None:
                then()
            proxy.rules = []

    healer = threading.Thread(target=heal)
    healer.start()
    try:
        yield
    finally:
        healer.join()


def test_full_staging_pauses_dispatch_until_the_bucket_is_back(
    tmp_path, slow_server, bucket, proxy, monkeypatch
):
    ids = write_prompts(tmp_path / "p.jsonl", 40)
    proxy.rules = [("PUT", "/completions/part-", "refuse")]
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    tight = UploadPolicy(
        staging_limit_bytes=3000, heartbeat=0.5, poll=0.1, base_delay=0.1, max_delay=0.3
    )
    asked_at_heal: list[int] = []
    # Six refused uploads: over a second of retries, while ~25 records (25 KB) were due.
    with healed_after(proxy, "refuse", 6, lambda: asked_at_heal.append(len(slow_server.requests))):
        result = run(
            tmp_path / "p.jsonl",
            URL,
            [slow_server.url],
            staging_dir=tmp_path / "s",
            upload_interval=0.3,
            upload=tight,
        )
    assert result.exit_code == 0
    events = "\n".join(result.stats.events)
    assert "staging is full" in events and "dispatch paused" in events
    assert "dispatch resumed" in events
    # ~1 KB a record: the pause held requests to a handful while the bucket was away.
    assert asked_at_heal[0] < 15
    assert_bucket_exactly_once(ids)
