"""bench_score.py specdec: true greedy speculative decoding with llama-cpp-python (target: the
embedded SmolLM2 Q4_1, draft: its Q2_K requantization), against `score`'s tau(k) on the
answers the loop produced (see bench_score.py's docstring)."""

from __future__ import annotations

import ctypes
import sys
import tempfile
from pathlib import Path

import numpy as np

from regen.check import Encoder
from regen.embedded_model import default_model_path
from regen.score import ScoreSettings, score_run
from regen.score.llama_draft import LlamaDraft
from regen.score.rows import Selection
from regen.tokenizer import load_tokenizer
from score_rows import PROMPTS, record, write_run


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
