"""Throughput of `regen export` to a dataset: tokenised Parquet shards, the check judged over
the same encodings, the draft vocabulary and the card.

    .venv/bin/python bench/bench_export.py --samples 5000 [--tokenizer PATH]

The run is written to a temporary directory first (bench_check's synthetic completions,
~2,600 tokens each), so the figures include reading it from disk. Three passes: the data
alone (no check), with the check, and with the check plus a 32,000-id draft vocabulary and
the card (what `regen export --tokenizer T --draft-vocab-size 32000` does).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from bench_check import default_tokenizer, synthetic
from regen.check import Encoder
from regen.export import Filters, export_run, make_format
from regen.export.publish import Publish, finish
from regen.jsonio import dumps_line


def write_run(root: Path, samples: int) -> Path:
    (root / "completions").mkdir(parents=True)
    with open(root / "completions" / "00000.jsonl", "wb") as fh:
        for record in synthetic(samples, words=2000):
            fh.write(dumps_line(record))
    return root


def one(run: Path, out: Path, encoder: Encoder, *, check: bool, vocab: bool) -> float:
    start = time.perf_counter()
    summary = export_run([run], out, make_format("tokenized"), encoder=encoder,
                         filters=Filters(), file_type="parquet",
                         check_limits={} if check else None, count_tokens=vocab)  # fmt: skip
    if vocab:
        finish(out, summary, encoder, Publish(runs=[str(run)], draft_vocab_size=32000))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--tokenizer", default=None)
    args = parser.parse_args()
    encoder = Encoder.load(args.tokenizer or default_tokenizer())
    with tempfile.TemporaryDirectory() as tmp:
        run = write_run(Path(tmp) / "run", args.samples)
        for name, check, vocab in (("data only", False, False), ("with check", True, False),
                                   ("check + vocab + card", True, True)):  # fmt: skip
            seconds = one(run, Path(tmp) / name.replace(" ", "-"), encoder, check=check,
                          vocab=vocab)  # fmt: skip
            print(f"{name:22} {seconds:7.1f} s  {args.samples / seconds:6.0f} samples/s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
