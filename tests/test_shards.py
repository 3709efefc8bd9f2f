"""`--shard I/N`: N `regen generate` processes over one input and one output location do
disjoint parts, and their union is exactly once, even with kill -9 and restarts."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import assert_exactly_once, read_lines, run, write_prompts
from regen.cli import main
from regen.errors import ConfigError
from regen.format.part import Part, parse_part, part_from_env
from regen.run import parts_status as shard_status
from regen.testing.fake_server import Behaviour


def test_parts_are_disjoint_cover_everything_and_do_not_depend_on_order():
    ids = [f"id-{i}" for i in range(3000)]
    parts = [Part(i, 4) for i in range(4)]
    owners = [[p.index for p in parts if p.owns_id(i)] for i in ids]
    assert all(len(o) == 1 for o in owners)
    sizes = [sum(1 for o in owners if o == [k]) for k in range(4)]
    assert min(sizes) > 600  # roughly even
    assert [Part(2, 4).owns_id(i) for i in reversed(ids)] == [Part(2, 4).owns_id(i) for i in ids][
        ::-1
    ]


def test_part_from_slurm_and_kubernetes():
    assert part_from_env({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "8"}) == Part(3, 8)
    slurm_from_one = {
        "SLURM_ARRAY_TASK_ID": "8",
        "SLURM_ARRAY_TASK_COUNT": "8",
        "SLURM_ARRAY_TASK_MIN": "1",
    }
    assert part_from_env(slurm_from_one) == Part(7, 8)
    k8s = {"JOB_COMPLETION_INDEX": "2", "REGEN_SHARD_COUNT": "5"}
    assert part_from_env(k8s) == Part(2, 5)
    assert part_from_env({}) == Part(0, 1)
    with pytest.raises(ConfigError, match="REGEN_SHARD_COUNT"):
        part_from_env({"JOB_COMPLETION_INDEX": "2"})
    with pytest.raises(ConfigError, match=r"0\.\.N-1"):
        parse_part("4/4")
    with pytest.raises(ConfigError, match="3/8"):
        parse_part("three")


def shard_command(prompts: Path, out: Path, url: str, part: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(prompts),
        "--output-dir",
        str(out),
        "--servers",
        url,
        "--concurrency",
        "4",
        "--display",
        "none",
        "--shard",
        part,
    ]


def test_three_shards_with_kills_are_exactly_once_over_the_union(tmp_path, fake_server):
    server = fake_server(Behaviour(slots=12, seconds_per_token=0.04))  # a part takes ~6 s
    n = 240
    ids = write_prompts(tmp_path / "p.jsonl", n)
    out = tmp_path / "out"
    rng = random.Random(9)
    kills = 0
    for _ in range(2):  # two rounds: all three start, two of them are killed midway
        procs = [
            subprocess.Popen(
                shard_command(tmp_path / "p.jsonl", out, server.url, f"{i}/3"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for i in range(3)
        ]
        try:
            time.sleep(rng.uniform(1.5, 2.5))
            for proc in procs[:2]:
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)
                    kills += 1
        finally:
            for proc in procs:
                _, err = proc.communicate(timeout=120)
                assert proc.returncode in (0, -signal.SIGKILL), err
    for i in range(3):
        done = subprocess.run(
            shard_command(tmp_path / "p.jsonl", out, server.url, f"{i}/3"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    assert kills >= 2
    completions, _ = assert_exactly_once(out, ids)
    assert len(completions) == n
    # Each part was asked only for its own prompts (plus what was in flight at a kill).
    assert len(server.requests) <= n + kills * 4
    status = CliRunner().invoke(main, ["status", str(out)])
    assert status.exit_code == 0, status.output
    assert "FINISHED" in status.output
    for part in ("shard 0/3: finished", "shard 1/3: finished", "shard 2/3", "whole: 240/240"):
        assert part in status.output


def test_changing_the_number_of_shards_on_resume_is_refused(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 10)
    first = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], part=Part(0, 2))
    assert first.exit_code == 0 and first.stats.completed < 10
    again = CliRunner().invoke(
        main, shard_command(tmp_path / "p.jsonl", tmp_path / "out", server.url, "1/3")[3:]
    )
    assert again.exit_code == 2
    assert "started as 2 shard(s)" in again.output and "--shard I/2" in again.output


def test_status_names_a_shard_whose_heartbeat_stopped(tmp_path, fake_server, monkeypatch):
    server = fake_server(Behaviour(slots=4, seconds_per_token=0.05))
    write_prompts(tmp_path / "p.jsonl", 80)
    out = tmp_path / "out"
    assert run(tmp_path / "p.jsonl", out, [server.url], part=Part(0, 2)).exit_code == 0
    proc = subprocess.Popen(
        shard_command(tmp_path / "p.jsonl", out, server.url, "1/2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not (out / "progress-0001-of-0002.json").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    monkeypatch.setattr(shard_status, "STALE_AFTER_S", 0.5)
    time.sleep(1.0)
    status = CliRunner().invoke(main, ["status", str(out)])
    assert status.exit_code == 0, status.output
    assert "shard 1/2: STALE" in status.output
    assert "shard 0/2: finished" not in status.output or "1 stale" in status.output
    assert "0 running, 1 stale" in status.output


def test_a_fleet_behind_a_router_is_one_url_with_a_large_concurrency(tmp_path, fake_server):
    """An SGLang router or a Kubernetes Service: one URL, many engines behind it. regen keeps
    --concurrency requests in flight on it (the router spreads them), exactly once. Fixed: the
    live level climbs from 16 and this run is too short to reach 200 (test_concurrency.py
    tests the climb)."""
    router = fake_server(Behaviour(slots=256, seconds_per_token=0.05))  # 0.4 s an answer
    ids = write_prompts(tmp_path / "p.jsonl", 600)
    result = run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        [router.url],
        concurrency=200,
        fixed_concurrency=True,
    )
    assert result.exit_code == 0
    assert_exactly_once(tmp_path / "out", ids)
    assert router.peak_in_flight >= 150  # not capped by a per-server default


def test_retry_errors_in_a_shared_dir_retries_only_its_own_part(tmp_path, fake_server):
    failing, healthy = fake_server(faults=["400"]), fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 12)
    out = tmp_path / "out"
    for index in (0, 1):
        run(tmp_path / "p.jsonl", out, [failing.url], part=Part(index, 2))
    result = run(tmp_path / "p.jsonl", out, [healthy.url], part=Part(1, 2), retry_errors=True)
    mine = {i for i in ids if Part(1, 2).owns_id(i)}
    assert result.stats.completed == len(mine) and 0 < len(mine) < 12
    _, errors = assert_exactly_once(out, ids)
    assert {e["id"] for e in errors} == set(ids) - mine  # part 0's errors are part 0's
    assert all("-s0001of0002-" in p.name for p in (out / "errors-retried").glob("*.jsonl"))


def test_every_unusable_line_is_recorded_by_exactly_one_part(tmp_path, fake_server):
    """A line that cannot be used goes by its line number, even when it has a usable id: a
    part that skips other parts' ids unparsed must still record the unusable lines it owns."""
    import orjson

    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 30)
    with open(tmp_path / "p.jsonl", "ab") as fh:
        for n in range(12):  # ids of every part, each on a line of some part
            bad = {"id": f"bad{n}", "messages": [{"role": "system", "content": "no user"}]}
            fh.write(orjson.dumps(bad) + b"\n")
        fh.write(b"{not json\n")
    for index in range(3):
        assert (
            run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], part=Part(index, 3)).exit_code
            == 0
        )
    assert_exactly_once(tmp_path / "out", ids)
    unusable = sorted(e["line"] for e in read_lines(tmp_path / "out", "errors"))
    assert unusable == list(range(31, 44))  # each once, whichever part owns it


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
