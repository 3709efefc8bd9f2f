"""`regen export` of a run in a bucket (moto's S3 server on loopback): peak RSS of the
process and its workers, and the peak local disk taken beside the export's own output.

    .venv/bin/python bench/bench_bucket.py --shards 8 --per-shard 250 [--workers 2]

The run is bench_check's synthetic completions (~2,600 tokens each) in `--shards` committed
shards. While the export runs, a thread samples every 0.2 s the RSS of this process and of
its children (the workers) and the bytes they have written to storage less the export's own
output; the peaks are printed with the run's size.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import threading
import time
from pathlib import Path

import boto3
import psutil

from bench_check import default_tokenizer, synthetic
from regen.check import Encoder
from regen.check.card import CardCheck
from regen.executors.pool import workers_for
from regen.export import ExportRequest, Filters, export_run, make_format
from regen.fleet.embedded import free_port
from regen.jsonio import dumps_line
from regen.storage.bucket import Bucket
from regen.storage.shards import adopt
from regen.testing.moto_server import moto_server

MIB = 2**20


class Peaks(threading.Thread):
    """Every 0.2 s: the RSS of this process and its workers, and the bytes they have caused
    to be written to storage (`/proc/PID/io`), less the export's own output."""

    def __init__(self, out_dir: Path) -> None:
        super().__init__(daemon=True)
        self.out_dir, self.rss, self.disk, self.done = out_dir, 0, 0, threading.Event()
        me = psutil.Process()
        self.aside = {p.pid for p in me.children(recursive=True)}  # the S3 server
        self.before = me.io_counters().write_bytes
        self.written: dict[int, int] = {}

    def run(self) -> None:
        me = psutil.Process()
        while not self.done.is_set():
            rss = 0
            for p in [me, *(p for p in me.children(recursive=True) if p.pid not in self.aside)]:
                with contextlib.suppress(psutil.NoSuchProcess):  # a worker that just ended
                    rss += p.memory_info().rss
                    self.written[p.pid] = p.io_counters().write_bytes
            output = sum(f.stat().st_size for f in self.out_dir.rglob("*") if f.is_file())
            self.rss = max(self.rss, rss)
            self.disk = max(self.disk, self.wrote() - output)
            time.sleep(0.2)

    def wrote(self) -> int:
        return sum(self.written.values()) - self.before


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--per-shard", type=int, default=250)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    encoder = Encoder.load(default_tokenizer())
    with moto_server(free_port()) as url, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(
            AWS_ENDPOINT_URL=url,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_DEFAULT_REGION="us-east-1",
        )
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket="bench")
        bucket, size = Bucket("s3://bench/run"), 0
        records = synthetic(args.shards * args.per_shard, words=2500)
        for n in range(args.shards):
            data = b"".join(dumps_line(next(records)) for _ in range(args.per_shard))
            bucket.put_bytes(f"completions/{n:05d}.jsonl", data)
            adopt(bucket, "completions", f"{n:05d}.jsonl")
            size += len(data)
        out = Path(tmp) / "out"
        peaks = Peaks(out)
        peaks.start()
        start = time.perf_counter()
        export_run(
            ExportRequest(
                ["s3://bench/run"],
                out,
                make_format("tokenized"),
                encoder=encoder,
                filters=Filters(),
                file_type="parquet",
                judge=CardCheck({}),
            ),
            workers=workers_for(args.workers),
        )
        took = time.perf_counter() - start
        peaks.done.set()
        peaks.join()
    rows = args.shards * args.per_shard
    print(
        f"{rows} rows in {args.shards} shards ({size / MIB:.0f} MiB, largest shard "
        f"{size / args.shards / MIB:.0f} MiB), {args.workers} workers: {took:.1f} s; "
        f"peak RSS (process + workers) {peaks.rss / MIB:.0f} MiB; peak local disk beside "
        f"the output {max(0, peaks.disk) / MIB:.1f} MiB (written in all "
        f"{peaks.wrote() / MIB:.0f} MiB)"
    )


if __name__ == "__main__":
    main()
