"""`regen score`: throughput, memory, agreement with a real speculative decoder, and the cost
of `--target-model` against generating the same rows.

    .venv/bin/python bench/bench_score.py throughput [--rows 12]   # draft tokens/s, 135M GGUF
    .venv/bin/python bench/bench_score.py memory [--rows 100000]   # peak RSS, n-gram, --all
    .venv/bin/python bench/bench_score.py specdec [--prompts 24 --k 3]
    .venv/bin/python bench/bench_score.py target [--prompts 10 --max-new 50 --threads 2]
    PYTHONPATH=src:bench .venv/bin/python bench/bench_score.py hidden [--rows 4 --tokens 2600]
    .venv/bin/python bench/bench_score.py                          # all five, default sizes

throughput: teacher-forced scoring with the embedded SmolLM2-135M as draft on rows of ~300
tokens (stored ids); the figure is tokens through the draft per second of `matches`.
memory: a synthetic run of N rows (stored ids, 32 prompt + 64 answer tokens) scored with the
n-gram draft and --all, then pooled; peak RSS of the whole process (ru_maxrss).
specdec: true greedy speculative decoding with llama-cpp-python: target = the embedded
SmolLM2 Q4_1, draft = its Q2_K requantization. Each round the draft proposes k tokens one by
one; the target verifies them in one batch (as engines do); the longest agreeing prefix plus
the target's own next token is kept. As in vLLM (and as `score` counts), the prefill gives the
first answer token and is no verify step, and the figure is vLLM's mean acceptance length,
1 + accepted / steps. It is compared with `score`'s tau(k) on the answers the loop produced
(score_specdec.py).
target: score_target.py.
hidden: the target's hidden-state pass for EAGLE-3 and DFlash, and two checkpoints side by
side (bench_score_hidden.py).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

from regen.check import Encoder
from regen.embedded_model import default_model_path
from regen.score import ScoreSettings, score_run
from regen.score.llama_draft import LlamaDraft
from regen.score.ngram import NgramDraft
from regen.score.rows import Selection
from regen.tokenizer import load_tokenizer
from score_rows import record, write_run
from score_specdec import specdec
from score_target import target_pass


def throughput(rows: int) -> dict:
    draft = LlamaDraft(default_model_path(), n_ctx=1024)
    rng = random.Random(0)
    seqs = [[rng.randrange(200, 40000) for _ in range(300)] for _ in range(rows)]
    draft.matches(seqs[0], 50)  # warm up: the model's pages come in on the first pass
    started = time.perf_counter()
    for seq in seqs:
        draft.matches(seq, 50)
    elapsed = time.perf_counter() - started
    tokens = sum(len(s) - 1 for s in seqs)
    return {
        "rows": rows,
        "tokens": tokens,
        "seconds": round(elapsed, 2),
        "draft_tokens_per_s": round(tokens / elapsed, 1),
        "threads": 2,
    }


def memory(rows: int) -> dict:
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        rows_made = (
            record(
                f"r{i}",
                f"c{i % 4}",
                [rng.randrange(50) for _ in range(32)],
                [rng.randrange(50) for _ in range(64)],
            )
            for i in range(rows)
        )
        run = write_run(Path(tmp) / "run", rows_made)  # streamed: the run is never in memory
        encoder = Encoder.of(load_tokenizer("embedded"))
        before = rss_mb()
        during, count = [before], itertools.count(1)

        def sample(label: str) -> None:  # the RSS every 1,000 rows scored
            if next(count) % 1000 == 0:
                during.append(rss_mb())

        started = time.perf_counter()
        settings = ScoreSettings(Selection("category", None, 0), list(range(1, 9)), "embedded")
        report = score_run(
            run, [NgramDraft()], encoder, settings, Path(tmp) / "score", on_row=sample
        )
        during.append(rss_mb())  # after pooling every row into the report
        elapsed = time.perf_counter() - started
    scored = report.drafts[0].groups["(overall)"].rows
    return {
        "rows": rows,
        "scored": scored,
        "seconds": round(elapsed, 1),
        "rows_per_s": round(rows / elapsed),
        "rss_before_scoring_mb": round(before),
        "peak_rss_while_scoring_mb": round(max(during)),
        "process_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def rss_mb() -> float:
    """The resident set now (ru_maxrss is the high-water mark of the whole process, which the
    tokenizer's load sets before scoring starts)."""
    with open("/proc/self/status") as fh:
        line = next(line for line in fh if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "what", nargs="*", default=["throughput", "memory", "specdec", "target", "hidden"]
    )
    parser.add_argument("--rows", type=int)
    parser.add_argument("--prompts", type=int, help="specdec: 24, target: 10")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--max-new", type=int, help="specdec: 48, target: 50")
    parser.add_argument("--threads", type=int, default=2, help="target: the models' threads")
    parser.add_argument("--tokens", type=int, default=2600, help="hidden: tokens per row")
    args = parser.parse_args()
    results = {}
    for what in args.what:
        if what == "throughput":
            results[what] = throughput(args.rows or 12)
        elif what == "memory":
            results[what] = memory(args.rows or 100_000)
        elif what == "specdec":
            results[what] = specdec(args.prompts or 24, args.k, args.max_new or 48)
        elif what == "target":
            results[what] = target_pass(args.prompts or 10, args.max_new or 50, args.threads)
        elif what == "hidden":
            from bench_score_hidden import hidden

            results[what] = hidden(args.rows or 4, args.tokens)
        else:
            print(f"unknown benchmark {what}", file=sys.stderr)
            return 2
        print(json.dumps({what: results[what]}, indent=1), flush=True)
    out = Path(".bench")
    out.mkdir(exist_ok=True)
    (out / "score.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
