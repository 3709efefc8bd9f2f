"""`--output-dir s3://bucket/prefix`: the bucket is the ledger. Against moto's standalone S3
server on loopback (started by pid): a run lands with the local layout, uploads by age,
resumes from the bucket, and status, check, export, prepare and score read it there."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import orjson
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from bucket_helpers import BUCKET, FAST, URL, assert_bucket_exactly_once, keys_in
from bucket_helpers import bucket as bucket  # the fixture
from gen_helpers import run, write_prompts
from regen.cli import main
from regen.format.sidecar import ShardKeys
from regen.records import record_key
from regen.storage import open_store
from regen.testing.fake_server import Behaviour


def test_a_run_lands_in_the_bucket_with_the_local_layout(tmp_path, fake_server, bucket):
    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 30)
    staging = tmp_path / "staging"
    result = run(
        tmp_path / "p.jsonl",
        URL,
        [server.url],
        staging_dir=staging,
        shard_max_records=7,
        upload=FAST,
    )
    assert result.exit_code == 0
    assert result.output_dir == URL and URL in result.message
    shards = keys_in(bucket, "completions")
    data = [k for k in shards if k.endswith(".jsonl")]
    assert len(data) == 5 and all(k + ".keys" in shards for k in data)  # by size: 7 a shard
    assert "manifest.json" in [
        o["Key"].rsplit("/")[-1] for o in bucket.list_objects_v2(Bucket=BUCKET)["Contents"]
    ]
    records = assert_bucket_exactly_once(ids)
    assert {r["messages"][-1]["content"] for r in records} == {
        f"answer to: question {i}" for i in ids
    }
    # Staging holds nothing that was uploaded.
    assert not list((staging / "completions").iterdir())
    sidecar = orjson.loads(
        bucket.get_object(Bucket=BUCKET, Key=f"exp/one/completions/{data[0]}.keys")["Body"].read()
    )
    assert len(sidecar["xxh3_128"]) == 32 and sidecar["count"] == 7
    body = bucket.get_object(Bucket=BUCKET, Key=f"exp/one/completions/{data[0]}")["Body"].read()
    shard = [orjson.loads(line) for line in body.splitlines()]
    keys = ShardKeys.from_json(sidecar)  # each record's key and input line, in order
    assert keys.lines.tolist() == [r["meta"]["line"] for r in shard]
    assert keys.record_keys.tolist() == [record_key(r["id"], r["sample"]) for r in shard]


def test_a_slow_run_uploads_by_age(tmp_path, fake_server, bucket):
    server = fake_server(Behaviour(slots=1, seconds_per_token=0.05))  # 0.4 s per answer
    write_prompts(tmp_path / "p.jsonl", 12)
    proc_out = tmp_path / "staging"
    seen_while_running: list[int] = []
    ended = threading.Event()

    def watch() -> None:  # objects in the bucket while answers are still being served
        while not ended.wait(0.2) and server.served < 12:
            seen_while_running.append(len(keys_in(bucket, "completions")))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run(
            tmp_path / "p.jsonl",
            URL,
            [server.url],
            staging_dir=proc_out,
            concurrency=1,
            upload_interval=0.5,
            upload=FAST,
        )
    finally:
        ended.set()
        watcher.join(timeout=30)
    assert result.exit_code == 0
    # Before the last answer was served (12 answers take 5 s or more), sealed-by-age shards
    # were already in the bucket: not all uploaded at the end.
    assert max(seen_while_running or [0]) >= 2, seen_while_running
    assert len(keys_in(bucket, "completions")) >= 6


def test_resume_on_an_empty_disk_rebuilds_the_ledger_from_the_bucket(tmp_path, fake_server, bucket):
    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 40)
    write_prompts(tmp_path / "half.jsonl", 20)  # the first 20 ids
    first = run(
        tmp_path / "half.jsonl",
        URL,
        [server.url],
        staging_dir=tmp_path / "a",
        upload=FAST,
        allow_changed_input=True,
    )
    assert first.exit_code == 0
    asked_before = len(server.requests)
    second = run(
        tmp_path / "p.jsonl",
        URL,
        [server.url],
        staging_dir=tmp_path / "b",
        upload=FAST,
        allow_changed_input=True,
    )
    assert second.exit_code == 0
    assert second.stats.finished_before == 20 and second.stats.completed == 20
    assert len(server.requests) - asked_before == 20
    assert_bucket_exactly_once(ids)
    manifest = open_store(URL).read_json("manifest.json")
    assert len(manifest["sessions"]) == 2  # each once, though each was put again at its end
    assert [s["ended"]["completed"] for s in manifest["sessions"]] == [20, 20]


def test_status_check_and_export_read_the_run_from_the_bucket(tmp_path, fake_server, bucket):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 9)
    assert (
        run(
            tmp_path / "p.jsonl", URL, [server.url], staging_dir=tmp_path / "s", upload=FAST
        ).exit_code
        == 0
    )
    status = CliRunner().invoke(main, ["status", URL])
    assert status.exit_code == 0, status.output
    assert f"{URL}: FINISHED" in status.output
    assert "finished: 9 of 9 items (100.0%): 9 completions, 0 errors" in status.output
    exported = CliRunner().invoke(
        main, ["export", URL, "--out", str(tmp_path / "ds"), "--format", "sharegpt"]
    )
    assert exported.exit_code == 0, exported.output
    rows = (
        (tmp_path / "ds" / "data" / "default" / "train-00000-of-00001.jsonl")
        .read_bytes()
        .splitlines()
    )
    assert len(rows) == 9
    report = tmp_path / "report.json"
    checked = CliRunner().invoke(
        main, ["check", URL, "--tokenizer", str(checkfix.qwen_style_dir()), "--json", str(report)]
    )
    assert checked.exit_code in (0, 1), checked.output  # a verdict, pass or fail
    assert orjson.loads(report.read_bytes())["overall"]["samples"] == 9


def test_an_unreachable_bucket_is_a_clear_error_at_start(tmp_path, fake_server, s3_endpoint):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 3)
    result = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "--output-dir",
            "s3://no-such/x",
            "--staging-dir",
            str(tmp_path / "s"),
            "--servers",
            server.url,
            "--display",
            "none",
        ],
    )
    assert result.exit_code == 6  # the output location cannot be written
    assert "s3://no-such/x" in result.output and "hint:" in result.output
    assert "testing" not in result.output  # the secret key's value never appears


def test_prepare_reads_from_and_writes_to_the_bucket(tmp_path, bucket, fake_server):
    source = Path(__file__).parent / "fixtures" / "prepare" / "metamathqa.jsonl"
    bucket.put_object(Bucket=BUCKET, Key="src/math.jsonl", Body=source.read_bytes())
    target = f"s3://{BUCKET}/prepared/prompts.jsonl"
    result = CliRunner().invoke(
        main,
        [
            "prepare",
            "-o",
            target,
            "--source",
            f"s3://{BUCKET}/src/math.jsonl",
            "--total",
            "5",
            "--seed",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    listed = {
        o["Key"] for o in bucket.list_objects_v2(Bucket=BUCKET, Prefix="prepared/")["Contents"]
    }
    assert listed == {
        "prepared/prompts.jsonl",
        "prepared/prompts.rejects.jsonl",
        "prepared/prompts.report.json",
    }
    report = orjson.loads(
        bucket.get_object(Bucket=BUCKET, Key="prepared/prompts.report.json")["Body"].read()
    )
    assert target in orjson.dumps(report).decode()
    # ... and generate takes it from there, into the bucket.
    server = fake_server()
    done = run(target, URL, [server.url], staging_dir=tmp_path / "s", upload=FAST)
    written = bucket.get_object(Bucket=BUCKET, Key="prepared/prompts.jsonl")["Body"].read()
    assert done.exit_code == 0 and done.stats.completed == written.count(b"\n") > 0


def test_two_shards_share_one_bucket_and_status_shows_both(tmp_path, fake_server, bucket):
    from regen.format.part import Part

    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 30)
    for index in (0, 1):  # two machines: each its own staging, one bucket
        part = Part(index, 2)
        result = run(
            tmp_path / "p.jsonl",
            URL,
            [server.url],
            part=part,
            staging_dir=tmp_path / f"s{index}",
            upload=FAST,
        )
        assert result.exit_code == 0 and 0 < result.stats.completed < 30
    assert_bucket_exactly_once(ids)
    assert len(server.requests) == 30
    status = CliRunner().invoke(main, ["status", URL])
    assert status.exit_code == 0, status.output
    assert "shard 0/2: finished" in status.output and "shard 1/2: finished" in status.output
    assert "whole: 30/30" in status.output and "FINISHED" in status.output


def test_staging_defaults_to_the_user_cache(tmp_path, fake_server, bucket, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 5)
    result = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "--output-dir",
            URL,
            "--servers",
            server.url,
            "--display",
            "none",
        ],
    )
    assert result.exit_code == 0, result.output
    (staging,) = (tmp_path / "cache" / "regen" / "staging").iterdir()
    assert (staging / "manifest.json").exists()  # the run staged there, under its URL's hash
    assert_bucket_exactly_once(ids)


def test_a_bucket_run_is_scored_beside_it_and_resumes_on_another_machine(
    tmp_path, fake_server, bucket, monkeypatch
):
    """`regen score s3://...` writes RUN/score into the bucket; a second machine (an empty
    cache) goes on from the rows there, and export selects by them."""
    write_prompts(tmp_path / "p.jsonl", 6)
    assert (
        run(
            tmp_path / "p.jsonl", URL, [fake_server().url], staging_dir=tmp_path / "s", upload=FAST
        ).exit_code
        == 0
    )
    tokenizer = str(checkfix.qwen_style_dir())
    args = ["score", URL, "--draft", "ngram", "--tokenizer", tokenizer, "--all", "--json"]
    for machine in ("one", "two"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / machine))  # its own staging
        scored = CliRunner().invoke(main, args)
        assert scored.exit_code == 0, scored.output
        report = orjson.loads(scored.output)
        assert report["drafts"][0]["groups"]["(overall)"]["rows"] == 6
        assert report["drafts"][0]["scored_now"] == (6 if machine == "one" else 0)
    assert {"score.json", "score.txt"} <= set(keys_in(bucket, "score"))
    listed = bucket.list_objects_v2(Bucket=BUCKET, Prefix="exp/one/score/ngram-")["Contents"]
    assert any(o["Key"].endswith("/rows.jsonl") for o in listed)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "three"))
    out = str(tmp_path / "ds")
    exported = CliRunner().invoke(
        main, ["export", URL, "--out", out, "--format", "sharegpt", "--max-acceptance", "1"]
    )
    assert exported.exit_code == 0, exported.output
    assert "ngram" in exported.output  # the score it selected by, fetched from the bucket
