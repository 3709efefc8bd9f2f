"""Parts of one bucket run on many machines (issue 9): one live writer per part (the run
lock covers one disk, the lease in the bucket the others), and --retry-errors that retries
only its own part. Against moto's S3 server on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import orjson
import pytest

from bucket_helpers import BUCKET, FAST, URL, assert_bucket_exactly_once, keys_in
from bucket_helpers import bucket as bucket  # the fixture
from gen_helpers import run, write_prompts
from regen.errors import RunStateError
from regen.storage import open_store
from regen.storage.bucket import Bucket
from regen.storage.lease import Lease, LeaseLost
from regen.testing.fake_server import Behaviour
from waiting import wait_until

LEASE_KEY = "exp/one/leases/whole.json"


def put_lease(s3, **fields) -> None:
    lease = {"token": "someone-else", "host": "node-b", "pid": 4242, "renewed": time.time()}
    s3.put_object(Bucket=BUCKET, Key=LEASE_KEY, Body=orjson.dumps({**lease, **fields}))


def lease_in(s3) -> dict | None:
    try:
        return orjson.loads(s3.get_object(Bucket=BUCKET, Key=LEASE_KEY)["Body"].read())
    except s3.exceptions.NoSuchKey:
        return None


def test_a_part_another_machine_is_running_is_refused(tmp_path, fake_server, bucket):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 5)
    put_lease(bucket)
    with pytest.raises(RunStateError) as err:
        run(tmp_path / "p.jsonl", URL, [server.url], staging_dir=tmp_path / "st", upload=FAST)
    assert "pid 4242 on node-b" in err.value.message and "expires in" in err.value.hint
    assert not server.requests
    assert lease_in(bucket)["token"] == "someone-else"  # not touched


def test_a_same_named_host_in_other_pids_is_not_looked_up_here(tmp_path, fake_server, bucket):
    """A container that shares this host's name (docker --network host) has other pids: its
    live lease is not taken for a dead process of ours."""
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 3)
    put_lease(bucket, host=socket.gethostname(), pid=dead_pid(), pid_space="pid:[1]")
    with pytest.raises(RunStateError, match="being run by pid"):
        run(tmp_path / "p.jsonl", URL, [server.url], staging_dir=tmp_path / "st", upload=FAST)


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("holder", ["stale elsewhere", "dead here"])
def test_a_stale_or_dead_holders_lease_is_taken_over(tmp_path, fake_server, bucket, holder):
    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 5)
    if holder == "stale elsewhere":
        put_lease(bucket, renewed=time.time() - 1000)
    else:  # a kill -9 on this machine, then the same command again: no waiting
        here = os.readlink("/proc/self/ns/pid")
        put_lease(bucket, host=socket.gethostname(), pid=dead_pid(), pid_space=here)
    result = run(tmp_path / "p.jsonl", URL, [server.url], staging_dir=tmp_path / "st", upload=FAST)
    assert result.exit_code == 0
    assert_bucket_exactly_once(ids)
    assert lease_in(bucket) is None  # released at the end


def test_of_two_processes_starting_together_one_goes_on(bucket):
    leases = [Lease(Bucket(URL), "0001-of-0004", settle=1.0) for _ in range(2)]
    outcomes: list[str] = []

    def take(lease: Lease) -> None:
        try:
            lease.acquire()
            outcomes.append("held")
        except RunStateError:
            outcomes.append("refused")

    threads = [threading.Thread(target=take, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(outcomes) == ["held", "refused"]


@pytest.mark.parametrize("count", [1, 2])  # two: affine dispatch has items waiting for a slot
def test_a_run_whose_lease_was_taken_stops_writing(tmp_path, fake_server, bucket, count):
    servers = [fake_server(Behaviour(slots=2, seconds_per_token=0.02)) for _ in range(count)]
    write_prompts(tmp_path / "p.jsonl", 200)
    sent = lambda: sum(len(s.requests) for s in servers)  # noqa: E731

    def take_over() -> None:  # once the run holds its lease and is generating
        try:
            wait_until(lambda: sent() >= 5, 20, "five requests sent", interval=0.05)
        finally:
            put_lease(bucket)

    thief = threading.Thread(target=take_over)
    thief.start()
    started = time.monotonic()
    with pytest.raises(LeaseLost) as err:
        run(
            tmp_path / "p.jsonl",
            URL,
            [s.url for s in servers],
            staging_dir=tmp_path / "st",
            upload=FAST,
        )
    thief.join()
    assert "taken over by pid 4242 on node-b" in err.value.message
    assert time.monotonic() - started < 20  # it stopped, it did not run to the end
    assert sent() < 200
    assert lease_in(bucket)["token"] == "someone-else"  # the new holder's lease is kept


def test_retry_errors_on_a_sharded_bucket_run_retries_only_its_part(tmp_path, fake_server, bucket):
    from regen.format.part import Part

    failing, healthy = fake_server(faults=["400"]), fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 12)
    parts = [Part(0, 2), Part(1, 2)]
    for part in parts:  # every request fails: both parts end with their prompts in errors/
        run(
            tmp_path / "p.jsonl",
            URL,
            [failing.url],
            part=part,
            staging_dir=tmp_path / part.name,
            upload=FAST,
        )
    errors_before = open_store(URL).count("errors")
    assert errors_before == 12
    result = run(
        tmp_path / "p.jsonl",
        URL,
        [healthy.url],
        part=parts[0],
        retry_errors=True,
        staging_dir=tmp_path / parts[0].name,
        upload=FAST,
    )
    mine = [i for i in ids if parts[0].owns_id(i)]
    assert result.stats.completed == len(mine) and 0 < len(mine) < 12
    bucket_run = open_store(URL)
    completions = {r["id"] for r in bucket_run.iter_records("completions")}
    still_failed = {r["id"] for r in bucket_run.iter_records("errors")}
    assert completions == set(mine) and still_failed == set(ids) - set(mine)
    assert_bucket_exactly_once(ids)
    retried = [k for k in keys_in(bucket, "errors-retried") if not k.endswith(".keys")]
    assert retried and all("-s0000of0002-" in k for k in retried)
