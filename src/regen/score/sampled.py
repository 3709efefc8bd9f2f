"""Acceptance at the temperature the answers were drawn at, for a draft that samples.

Under speculative sampling a draft token x ~ q is accepted with probability min(1, p(x)/q(x)),
so a position accepts with probability sum_x min(p(x), q(x)). The run's answer token x is a
draw from the target p itself, and for it min(1, q(x)/p(x)) has exactly that expectation: one
logprob per answer token from the target (generate --logprobs) and the draft's own probability
of the same token give the acceptance at the run's temperature.

p and q must be the distributions the tokens are drawn from: after temperature, top-k and
top-p, in vLLM's order (vllm/v1/sample/sampler.py, ops/topk_topp_sampler.py). What each engine
returns as a logprob (`KINDS`):
    vllm      processed, when started with --logprobs-mode processed_logprobs (regen serve
              adds it; the default raw_logprobs is the model's own distribution); a speculating
              server is left raw (regen serve does not add it there: spec_metrics.py)
    sglang    after temperature, before top-k/top-p (sglang/srt/layers/sampler.py; unless
              SGLANG_RETURN_ORIGINAL_LOGPROB is set), so it is the drawn one without truncation
    llamacpp  llama-cpp-python: the raw model's (llama.py logits_to_logprobs over its scores),
              the drawn one only at temperature 1 without truncation
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KINDS = {"vllm": "processed", "sglang": "temperature", "llamacpp": "raw"}


@dataclass(frozen=True)
class DrawnAt:
    """The sampling an answer was drawn with, from its `meta.sampling` (None: unknown, the
    server's default)."""

    temperature: float | None
    top_p: float | None = None
    top_k: int | None = None
    logprobs: str = "processed"  # what the engine's logprobs are (KINDS)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def truncated(self) -> bool:
        return (self.top_p is not None and self.top_p < 1) or bool(self.top_k and self.top_k > 0)

    def logprobs_fit(self) -> str | None:
        """Why the run's logprobs are not of the drawn distribution, or None when they are."""
        if self.temperature is None:
            return "the answers were drawn at the server's default temperature, not recorded"
        if self.logprobs == "raw" and (self.temperature != 1 or self.truncated):
            return ("the engine returned the raw model's logprobs (llama-cpp-python; vLLM "
                    "without --logprobs-mode processed_logprobs, as on a speculating server), "
                    f"not those at temperature {self.temperature} with top-k/top-p")  # fmt: skip
        if self.logprobs == "temperature" and self.truncated:
            return "the engine (SGLang) returns logprobs before top-k/top-p"
        return None


GREEDY_DEFAULT = DrawnAt(0.0)  # a row built without a record (tests): greedy


def drawn_at(raw: dict[str, Any]) -> DrawnAt:
    """A completion record's sampling; llama.cpp's neutral values count where regen sent them."""
    meta = _dict(raw.get("meta"))
    sampling = _dict(meta.get("sampling"))
    values = {**_dict(sampling.get("neutral")), **{k: v for k, v in sampling.items()
                                                   if v is not None}}  # fmt: skip
    engine = _dict(meta.get("engine")).get("name")
    kind = KINDS.get(engine or "", "processed")
    if engine == "vllm" and meta.get("speculative_decoding"):
        kind = "raw"  # regen serve leaves a speculating vLLM in raw mode (spec_metrics.py)
    return DrawnAt(_number(values.get("temperature")), _number(values.get("top_p")),
                   _whole(values.get("top_k")), kind)  # fmt: skip


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _whole(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


ROWS_AT_ONCE = 64  # a block of [64, vocab] float64 arrays: 25 MB each for a 49K vocabulary


def drawn_logprobs(logits: Any, tokens: Any, at: DrawnAt) -> Any:
    """log q(token) per row of `logits` ([rows, vocab]) under temperature, then top-k, then
    top-p, as vLLM draws (a token cut by top-k/top-p gets -inf); a block of rows at a time."""
    import numpy as np

    tokens = np.asarray(tokens)
    return np.concatenate([
        _drawn_block(logits[i : i + ROWS_AT_ONCE], tokens[i : i + ROWS_AT_ONCE], at)
        for i in range(0, len(tokens), ROWS_AT_ONCE)
    ]) if len(tokens) else np.zeros(0)  # fmt: skip


def _drawn_block(logits: Any, tokens: Any, at: DrawnAt) -> Any:
    import numpy as np

    z = np.asarray(logits, dtype=np.float64) / float(at.temperature or 1.0)
    rows = np.arange(z.shape[0])
    if at.top_k and 0 < at.top_k < z.shape[1]:
        kth = np.partition(z, -at.top_k, axis=1)[:, -at.top_k][:, None]
        z = np.where(z < kth, -np.inf, z)
    z = z - z.max(axis=1, keepdims=True)
    logq = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    if at.top_p is not None and at.top_p < 1:
        order = np.argsort(-logq, axis=1)
        probs = np.exp(np.take_along_axis(logq, order, axis=1))
        before = np.cumsum(probs, axis=1) - probs  # mass of the tokens ranked above
        keep = np.zeros_like(logq, dtype=bool)
        np.put_along_axis(keep, order, before < at.top_p, axis=1)
        logq = np.where(keep, logq, -np.inf)
        logq = logq - np.log(np.exp(logq).sum(axis=1, keepdims=True))
    return logq[rows, tokens]


def acceptances(draft_logq: Any, target_logp: list[float]) -> list[float]:
    """min(1, q(x)/p(x)) per answer token."""
    import numpy as np

    ratio = np.exp(np.minimum(np.asarray(draft_logq) - np.asarray(target_logp), 0.0))
    return ratio.tolist()
