"""A real speculative-sampling loop (Leviathan et al., Chen et al.), to hold `score`'s sampled
estimate min(1, q/p) against: the draft samples k tokens from its own q, feeding its own
proposals back; the target accepts each with probability min(1, p/q), resamples a rejected
one from max(0, p - q) renormalised, and adds its own token when all k pass. Its answers are
draws from the target p, so they make a run that `score` scores as any other.

The target is the embedded GGUF decoded one token a step on llama.cpp (as its server decodes
and as `score --target-model` does: llama_target_pass.py), at temperature T with no top-k/top-p,
where llama.cpp's order and vLLM's agree. Steps are counted as vLLM counts them (the
prefill's token is no step; tau = 1 + accepted / steps), as score counts them (accept.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Q = Callable[[list[int]], np.ndarray]  # the draft's logits for the token after these


@dataclass
class Measured:
    answers: list[list[int]] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)  # per verify step

    @property
    def tau(self) -> float:
        return 1 + sum(self.accepted) / len(self.accepted)

    @property
    def stderr(self) -> float:
        """The standard error of tau between steps."""
        return float(np.std(self.accepted, ddof=1) / np.sqrt(len(self.accepted)))


class StepTarget:
    """The GGUF target, its KV cache holding every token but the last one emitted."""

    def __init__(self, llm: Any) -> None:
        self.llm, self.n_vocab = llm, llm.n_vocab()

    def prefill(self, prompt: Sequence[int]) -> np.ndarray:
        ctx, batch = self.llm._ctx, self.llm._batch
        ctx.kv_cache_clear()
        for at in range(0, len(prompt), self.llm.n_batch):
            chunk = list(prompt[at : at + self.llm.n_batch])
            batch.set_batch(batch=chunk, n_past=at, logits_all=False)
            ctx.decode(batch)
        self.pos = len(prompt)
        return self._logits()

    def step(self, token: int) -> np.ndarray:
        """Feed the last emitted token: the logits for the one after it."""
        self.llm._batch.set_batch(batch=[token], n_past=self.pos, logits_all=True)
        self.llm._ctx.decode(self.llm._batch)
        self.pos += 1
        return self._logits()

    def _logits(self) -> np.ndarray:
        ctx = self.llm._ctx
        return np.ctypeslib.as_array(ctx.get_logits(), shape=(self.n_vocab,)).astype(np.float64)


def softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    z = logits / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


def speculate(
    target: StepTarget,
    q_logits: Q,
    prompt: list[int],
    *,
    k: int,
    temperature: float,
    eos: int,
    max_new: int,
    rng: np.random.Generator,
    measured: Measured,
) -> None:
    """One answer by speculative sampling, its verify steps added to `measured`."""
    p = softmax(target.prefill(prompt), temperature)
    out = [int(rng.choice(len(p), p=p))]  # the prefill's token: no verify step
    while len(out) < max_new and out[-1] != eos:
        drafts, qs = [], []
        for _ in range(k):
            q = softmax(q_logits(prompt + out + drafts), temperature)
            drafts.append(int(rng.choice(len(q), p=q)))
            qs.append(q)
        p = softmax(target.step(out[-1]), temperature)
        accepted = 0
        for d, q in zip(drafts, qs, strict=True):
            if rng.random() >= min(1.0, p[d] / q[d]):  # rejected: resample from p - q
                rest = np.maximum(p - q, 0.0)
                out.append(int(rng.choice(len(rest), p=rest / rest.sum())))
                break
            accepted += 1
            out.append(d)
            if d == eos:
                break
            p = softmax(target.step(d), temperature)
        else:
            out.append(int(rng.choice(len(p), p=p)))  # all k accepted: the target's own
        measured.accepted.append(accepted)
    answer = out[: out.index(eos) + 1] if eos in out else out[:max_new]
    measured.answers.append(answer)
