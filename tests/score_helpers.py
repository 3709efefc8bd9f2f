"""Builders for the score tests: the embedded SmolLM2, a requantized copy made with llama.cpp's
quantize API, runs whose answers are the model's own greedy decoding (token by token), and
`score` with the settings those tests share."""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

from regen.score import ScoreSettings, score_run
from regen.score.rows import Selection

PROMPTS = {
    "chat": ["Say hello to a new colleague in one sentence.", "What is a good name for a cat?"],
    "code": ["Write a Python function that adds two numbers.", "Write a for loop in Python."],
    "math": ["What is 12 times 7? Answer briefly.", "What is the square root of 81?"],
}
ROWS = sum(len(p) for p in PROMPTS.values())
EOS = "<|im_end|>"


def requantize(src: Path, dst: Path) -> Path:
    """A lower-bit copy of `src` (same tokenizer by construction): a draft that disagrees with
    the target at some positions."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q2_K
    params.allow_requantize = True
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    assert rc == 0 and dst.is_file(), f"quantize failed ({rc})"
    return dst


def generator(path: Path) -> Any:
    from llama_cpp import Llama

    return Llama(model_path=str(path), logits_all=True, n_ctx=512, n_threads=2, verbose=False)


def greedy(llm: Any, prompt_ids: list[int], eos: int, max_new: int = 12) -> list[int]:
    """Incremental greedy decoding: the prompt in one eval, then one token per eval."""
    import numpy as np

    llm.reset()
    llm.eval(prompt_ids)
    out: list[int] = []
    while len(out) < max_new:
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        out.append(token)
        if token == eos:
            break
        llm.eval([token])
    return out


def model_run(root: Path, llm: Any, tok: Any, *, token_ids: bool = True) -> Path:
    """A `regen generate`-shaped run: one row per prompt, answered greedily by `llm`."""
    eos = tok.convert_tokens_to_ids(EOS)
    lines = []
    for category, prompts in PROMPTS.items():
        for n, prompt in enumerate(prompts):
            messages = [{"role": "user", "content": prompt}]
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            prompt_ids = tok(text, add_special_tokens=False)["input_ids"]
            answer = greedy(llm, prompt_ids, eos)
            content = tok.decode([t for t in answer if t != eos])
            rec: dict[str, Any] = {
                "id": f"{category}{n}",
                "sample": 0,
                "messages": [*messages, {"role": "assistant", "content": content}],
                "finish_reason": "stop" if answer[-1] == eos else "length",
                "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(answer)},
                "source": {"dataset": f"src-{category}"},
                "category": category,
            }
            if token_ids:
                rec["token_ids"] = {"prompt": prompt_ids, "completion": answer}
            lines.append(json.dumps(rec))
    (root / "completions").mkdir(parents=True, exist_ok=True)
    (root / "completions" / "00000.jsonl").write_text("\n".join(lines) + "\n")
    return root


def settings(per_group: int | None = None, seed: int = 0, by: str = "category") -> ScoreSettings:
    return ScoreSettings(Selection(by, per_group, seed), list(range(1, 9)), "embedded")


def score(run: Path, drafts, encoder, out: Path | None = None, **kw):
    """Into RUN/score by default, as the CLI does: a draft scored by an earlier test is
    resumed there, not scored again (each model pass costs seconds of scarce CPU)."""
    out = out or run / "score"
    return score_run(run, drafts, encoder, kw.pop("settings", settings()), out, **kw).to_json()
