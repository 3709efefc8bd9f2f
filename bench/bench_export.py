"""Throughput of `regen export` to a dataset: tokenised Parquet shards with the check judged
over the same encodings (what `regen export --format tokenized --tokenizer T` does), from
the text (rendered and re-tokenised) and from the engine's stored token ids, over 1..N
workers, with the CPU time each pass took beside its wall time.

    .venv/bin/python bench/bench_export.py --samples 2000 [--workers 1,2] [--tokenizer PATH]
        [--from text,ids] [--vocab] [--json FILE]

The run is written to a temporary directory first (bench_check's synthetic completions,
~2,600 tokens each; with stored ids, the prompt and answer ids the engine would return),
so the figures include reading it from disk. CPU time is this process's and its workers'
(user + system): on a machine shared with other work, samples per CPU-second is the figure
that does not move with the load; the wall rate is what a user waits. "Second half" is the
rate over the second half of the rows: what a long export runs at once it is under way.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from bench_check import cpu_seconds, default_tokenizer, synthetic
from regen.check import Encoder
from regen.check.card import CardCheck
from regen.export import ExportRequest, Filters, export_run, make_format
from regen.export.publish import Publish, finish
from regen.finished.record import Completion
from regen.finished.render import generation_prompt
from regen.jsonio import dumps_line

try:  # imported before any timing: it loads the executors (and generate's modules) once
    from regen.executors.pool import workers_for
except ImportError:  # a tree from before workers (`--before`)
    workers_for = None


def write_run(root: Path, samples: int, words: int = 2500, encoder: Encoder | None = None) -> Path:
    """The synthetic run; with `encoder`, each line carries the ids an engine would store."""
    (root / "completions").mkdir(parents=True)
    with open(root / "completions" / "00000.jsonl", "wb") as fh:
        for record in synthetic(samples, words=words):
            if encoder is not None:
                record["token_ids"] = engine_ids(encoder, record)
            fh.write(dumps_line(record))
    return root


def engine_ids(encoder: Encoder, record: dict) -> dict:
    """Prompt ids (the render up to the generation prompt) and answer ids with the stop
    token, as vLLM returns them; taken from the re-tokenised sample so that they agree."""
    completion = Completion.of(record)
    enc = encoder.encode(completion)
    start, end = enc.final_generated
    assert generation_prompt(encoder.tok, completion)  # the template has one
    return {"prompt": enc.input_ids[:start], "completion": enc.input_ids[start:end]}


def spread(workers: int) -> dict:
    """`workers=` for export_run; {} for a tree from before workers (`--before`: one
    process, the Rust tokenizer's threads on every core), to measure it side by side."""
    return {} if workers_for is None else {"workers": workers_for(workers)}


class HalfWay:
    """When the export read its middle row: the rate over the second half is the steady
    one, after the process's first-time costs (its first row groups touch memory that this
    VM hands out slowly: about a second an export, which a 900K-row export does not feel)."""

    def __init__(self, samples: int) -> None:
        self.middle, self.read, self.at = samples // 2, 0, 0.0

    def __call__(self, _run: str) -> None:
        self.read += 1
        if self.read == self.middle:
            self.at = time.perf_counter()


def one(
    run: Path, out: Path, encoder: Encoder, workers: int, vocab: bool, samples: int
) -> tuple[float, ...]:
    """Wall seconds, CPU seconds in all, CPU seconds of this (the folding) process, and the
    samples per second over the second half."""
    options, half = spread(workers), HalfWay(samples)
    wall, cpu, own = time.perf_counter(), cpu_seconds(), cpu_seconds(resource.RUSAGE_SELF)
    request = ExportRequest(
        [run],
        out,
        make_format("tokenized"),
        encoder=encoder,
        filters=Filters(),
        file_type="parquet",
        judge=CardCheck({}),
        count_tokens=vocab,
    )
    summary = export_run(request, on_row=half, **options)
    if vocab:
        finish(out, summary, encoder, Publish(runs=[str(run)], draft_vocab_size=32000))
    own = cpu_seconds(resource.RUSAGE_SELF) - own
    end = time.perf_counter()
    steady = (samples - half.middle) / (end - half.at)
    return end - wall, cpu_seconds() - cpu, own, steady


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--words", type=int, default=2500, help="~1 token a word")
    parser.add_argument("--workers", default="1,2", help="worker counts, side by side")
    parser.add_argument("--from", dest="sources", default="text,ids")
    parser.add_argument("--vocab", action="store_true", help="also a draft vocabulary + card")
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--json", type=Path, help="append the figures here as JSON lines")
    args = parser.parse_args()
    encoder = Encoder.load(args.tokenizer or default_tokenizer())
    tokens = len(encoder.encode(Completion.of(next(synthetic(1, args.words)))).input_ids)
    print(f"{args.samples} samples of ~{tokens} tokens")
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            source: write_run(
                Path(tmp) / source, args.samples, args.words, encoder if source == "ids" else None
            )
            for source in args.sources.split(",")
        }
        for source, run in runs.items():
            for workers in map(int, args.workers.split(",")):
                out = Path(tmp) / f"out-{source}-{workers}"
                wall, cpu, own, steady = one(run, out, encoder, workers, args.vocab, args.samples)
                line = {
                    "from": source,
                    "workers": workers,
                    "samples": args.samples,
                    "tokens": tokens,
                    "wall_s": round(wall, 2),
                    "cpu_s": round(cpu, 2),
                    "per_s": round(args.samples / wall),
                    "per_cpu_s": round(args.samples / cpu),
                    "main_cpu_s": round(own, 2),
                    "steady_per_s": round(steady),
                }
                print(
                    f"from {source:4} workers {workers}: {wall:6.1f} s wall "
                    f"{args.samples / wall:6.0f}/s (second half {steady:5.0f}/s), "
                    f"{cpu:6.1f} s CPU "
                    f"{args.samples / cpu:6.0f}/CPU-s; this process {own:5.1f} s CPU "
                    f"({own / args.samples * 1e6:.0f} us a row)"
                )
                if args.json:
                    with open(args.json, "a") as fh:
                        fh.write(json.dumps(line) + "\n")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process {peak:.0f} MiB")


if __name__ == "__main__":
    main()
