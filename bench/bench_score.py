"""`regen score`: throughput, memory, and agreement with a real speculative decoder.

    .venv/bin/python bench/bench_score.py throughput [--rows 12]   # draft tokens/s, 135M GGUF
    .venv/bin/python bench/bench_score.py memory [--rows 100000]   # peak RSS, n-gram, --all
    .venv/bin/python bench/bench_score.py specdec [--prompts 24 --k 3]
    .venv/bin/python bench/bench_score.py                          # all three, default sizes

throughput: teacher-forced scoring with the embedded SmolLM2-135M as draft on rows of ~300
tokens (stored ids); the figure is tokens through the draft per second of `matches`.
memory: a synthetic run of N rows (stored ids, 32 prompt + 64 answer tokens) scored with the
n-gram draft and --all, then pooled; peak RSS of the whole process (ru_maxrss).
specdec: true greedy speculative decoding with llama-cpp-python: target = the embedded
SmolLM2 Q4_1, draft = its Q2_K requantization. Each round the draft proposes k tokens one by
one; the target verifies them in one batch (as engines do); the longest agreeing prefix plus
the target's own next token is kept. As in vLLM (and as `score` counts), the prefill gives the
first answer token and is no verify step, and the figure is vLLM's mean acceptance length,
1 + accepted / steps. It is compared with `score`'s tau(k) on the answers the loop produced.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import random
import resource
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from regen.check import Encoder
from regen.embedded_model import default_model_path
from regen.score import ScoreSettings, score_run
from regen.score.llama_draft import LlamaDraft
from regen.score.ngram import NgramDraft
from regen.score.rows import Selection
from regen.tokenizer import load_tokenizer

PROMPTS = {
    "chat": [
        "Say hello to a new colleague.",
        "Give me a tip for sleeping better.",
        "What should I pack for a beach trip?",
        "Describe autumn in two sentences.",
        "How do I make a cup of tea?",
        "Suggest a name for a coffee shop.",
        "What is a good hobby for a rainy day?",
        "Write a short thank-you note.",
    ],
    "code": [
        "Write a Python function that reverses a string.",
        "Write a Python function that returns the largest number in a list.",
        "Write a for loop in Python that prints 1 to 10.",
        "Write a Python class for a bank account.",
        "Write a SQL query selecting all users.",
        "Write a JavaScript function that adds two numbers.",
        "Write a Python function that checks if a number is even.",
        "Write a bash command that counts lines in a file.",
    ],
    "math": [
        "What is 12 times 7?",
        "What is the square root of 81?",
        "What is 15% of 200?",
        "Solve for x: 2x + 6 = 14.",
        "What is the area of a circle of radius 3?",
        "What is 1001 minus 999?",
        "How many minutes are in 3 hours?",
        "What is the sum of the angles in a triangle?",
    ],
}


def requantize(src: Path, dst: Path) -> Path:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = (
        llama_cpp.LLAMA_FTYPE_MOSTLY_Q2_K,
        True,
        2,
    )
    assert (
        llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
        == 0
    )
    return dst


def write_run(root: Path, rows: Iterable[dict]) -> Path:
    (root / "completions").mkdir(parents=True, exist_ok=True)
    with open(root / "completions" / "00000.jsonl", "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return root


def record(rid: str, category: str, prompt: list[int], answer: list[int]) -> dict:
    return {
        "id": rid,
        "sample": 0,
        "category": category,
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        "token_ids": {"prompt": prompt, "completion": answer},
    }


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


def argmax_at(llm, i: int) -> int:
    return int(np.argmax(llm.scores[i]))


def speculate(target, draft, prompt: list[int], k: int, eos: int, max_new: int):
    """Greedy speculative decoding; returns (answer ids, verify steps, accepted drafts)."""
    target.reset()
    draft.reset()
    target.eval(prompt)  # the prefill: its token is the answer's first, no verify step
    ctx, steps, total = [*prompt, argmax_at(target, target.n_tokens - 1)], 0, 0
    while len(ctx) - len(prompt) < max_new and ctx[-1] != eos:
        proposals: list[int] = []
        for _ in range(k):  # the draft catches up on what it has not seen, then one at a time
            draft.eval((ctx + proposals)[draft.n_tokens :])
            proposals.append(argmax_at(draft, draft.n_tokens - 1))
        base = target.n_tokens
        target.eval((ctx + proposals)[base:])  # one batch: verify every proposal at once
        first = len(ctx) - 1  # the row predicting proposals[0]
        accepted = 0
        while accepted < k and argmax_at(target, first + accepted) == proposals[accepted]:
            accepted += 1
        bonus = argmax_at(target, first + accepted)
        ctx += [*proposals[:accepted], bonus]
        steps, total = steps + 1, total + accepted
        target.n_tokens = len(ctx) - 1  # the bonus token is fed in the next round
        draft.n_tokens = min(draft.n_tokens, len(ctx) - 1)
        if eos in ctx[len(prompt) :]:
            ctx = ctx[: ctx.index(eos, len(prompt)) + 1]
    # the last step may pass max_new or the end: vLLM counts what it accepted there too
    return ctx[len(prompt) :], steps, total


def greedy(target, prompt: list[int], eos: int, max_new: int) -> list[int]:
    target.reset()
    target.eval(prompt)
    out: list[int] = []
    while len(out) < max_new:
        out.append(argmax_at(target, target.n_tokens - 1))
        if out[-1] == eos:
            break
        target.eval([out[-1]])
    return out


def _llama(path: Path):
    from llama_cpp import Llama

    return Llama(model_path=str(path), logits_all=True, n_ctx=1024, n_threads=2, verbose=False)


def specdec(n_prompts: int, k: int, max_new: int) -> dict:
    tok = load_tokenizer("embedded")
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    with tempfile.TemporaryDirectory() as tmp:
        draft_path = requantize(default_model_path(), Path(tmp) / "draft-q2k.gguf")
        target, draft = _llama(default_model_path()), _llama(draft_path)
        rows, greedy_rows, measured, lossless = [], [], {}, 0
        chosen = [(c, p) for c, ps in PROMPTS.items() for p in ps]
        for i, (category, prompt) in enumerate(chosen[:n_prompts]):
            text = tok.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
            ids = tok(text, add_special_tokens=False)["input_ids"]
            answer, steps, accepted = speculate(target, draft, ids, k, eos, max_new)
            plain = greedy(target, ids, eos, len(answer))
            lossless += answer == plain
            greedy_rows.append(record(f"g{i}", category, ids, plain))
            was_accepted, all_steps = measured.get(category, (0, 0))
            measured[category] = (was_accepted + accepted, all_steps + steps)
            rows.append(record(f"p{i}", category, ids, answer))
            print(f"prompt {i}: {len(answer)} tokens in {steps} steps", file=sys.stderr, flush=True)
        run = write_run(Path(tmp) / "run", rows)
        scorer = LlamaDraft(draft_path, n_ctx=1024)
        settings = ScoreSettings(Selection("category", None, 0), [k], "embedded")
        report = score_run(run, [scorer], Encoder.of(tok), settings, Path(tmp) / "score")
        groups = report.to_json()["drafts"][0]["groups"]
        # the target as its own draft, teacher-forced, on its incremental greedy answers: every
        # miss is a position where one batched pass and token-by-token decoding disagree
        identity = LlamaDraft(default_model_path(), n_ctx=1024)
        plain_run = write_run(Path(tmp) / "greedy", greedy_rows)
        ties = score_run(plain_run, [identity], Encoder.of(tok), settings, Path(tmp) / "ties")
        agree = ties.to_json()["drafts"][0]["groups"]
    out = {
        "prompts": len(rows),
        "k": k,
        "max_new": max_new,
        "lossless_vs_greedy": lossless,
        "by_category": {},
    }
    for category, (accepted, steps) in measured.items():
        simulated = groups[category]["by_k"][0]["tau"]["value"]
        real = 1 + accepted / steps
        out["by_category"][category] = {
            "measured_tokens_per_step": round(real, 3),
            "score_tau": simulated,
            "difference_pct": round(100 * (simulated - real) / real, 1),
            "batched_vs_incremental_disagree_pct": round(
                100 * (1 - agree[category]["top1_match"]["value"]), 2
            ),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="*", default=["throughput", "memory", "specdec"])
    parser.add_argument("--rows", type=int)
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--max-new", type=int, default=48)
    args = parser.parse_args()
    results = {}
    for what in args.what:
        if what == "throughput":
            results[what] = throughput(args.rows or 12)
        elif what == "memory":
            results[what] = memory(args.rows or 100_000)
        elif what == "specdec":
            results[what] = specdec(args.prompts, args.k, args.max_new)
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
