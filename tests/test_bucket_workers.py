"""check and export of a run in a bucket (moto's S3 on loopback), read shard by shard by two
worker processes: the same report and the same bytes as the run's local copy in one process."""

from __future__ import annotations

import sys
from pathlib import Path

import boto3

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.check import Encoder, StatOptions, check_run
from regen.check.card import CardCheck
from regen.executors.pool import LocalWorkers
from regen.export import ExportRequest, Filters, export_run, make_format
from regen.parallel import InProcess
from regen.storage.bucket import Bucket
from regen.storage.shards import adopt

BUCKET = "runs"
URL = f"s3://{BUCKET}/exp/shards"


def shards() -> list[list[dict]]:
    """Four shards of mixed samples: healthy in two domains, empty, cut short."""
    out = []
    for k in range(4):
        rows = [
            checkfix.completion(
                f"k{k}-{i}",
                f"Paris is the capital, answer {k}.{i} of several words.",
                category=("web", "code")[i % 2],
            )
            for i in range(25)
        ]
        rows.append(checkfix.completion(f"k{k}-empty", "", reasoning="", thinking="on"))
        rows.append(checkfix.completion(f"k{k}-cut", "Half an answ", finish="length"))
        out.append(rows)
    return out


def test_a_bucket_run_exports_and_checks_as_its_local_copy(tmp_path, s3_endpoint):
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket=BUCKET)
    local, bucket = tmp_path / "run", Bucket(URL)
    for k, rows in enumerate(shards()):
        checkfix.write_run(local, rows, shard=f"{k:05d}.jsonl")
        body = (local / "completions" / f"{k:05d}.jsonl").read_bytes()
        bucket.put_bytes(f"completions/{k:05d}.jsonl", body)
        adopt(bucket, "completions", f"{k:05d}.jsonl")  # committed, as generate leaves it
    encoder = Encoder.of(checkfix.load("qwen"))
    files = []
    for name, run, workers in (
        ("local", local, InProcess()),
        ("bucket", URL, LocalWorkers(2, small=1)),
    ):
        out = tmp_path / name
        request = ExportRequest(
            [run],
            out,
            make_format("tokenized"),
            encoder=encoder,
            filters=Filters(drop_truncated=True),
            eval_fraction=0.2,
            file_type="parquet",
            judge=CardCheck({}),
        )
        summary = export_run(request, workers=workers)
        assert summary.read == 108 and summary.dropped == {"truncated": 4}
        files.append(
            {
                p.relative_to(out).as_posix(): p.read_bytes()
                for p in sorted((out / "data").rglob("*.parquet"))
            }
        )
    assert files[0] == files[1] and len(files[0]) >= 3
    reports = [
        check_run([run], encoder, StatOptions(), {}, workers=workers).to_json()
        for run, workers in ((local, InProcess()), (URL, LocalWorkers(2, small=1)))
    ]
    for report in reports:  # which run has no manifest: the one place the two differ
        assert "has no manifest.json" in report.pop("composition")["unavailable"]
    assert reports[0] == reports[1] and reports[0]["overall"]["samples"] == 108
