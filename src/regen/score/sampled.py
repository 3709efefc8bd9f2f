"""Acceptance at the temperature the answers were drawn at, for a draft that samples.

Under speculative sampling a draft token x ~ q is accepted with probability min(1, p(x)/q(x)),
so a position accepts with probability sum_x min(p(x), q(x)). The run's answer token x is a
draw from the target p itself, and for it min(1, q(x)/p(x)) has exactly that expectation: one
logprob per answer token from the target (generate --logprobs) and the draft's own probability
of the same token give the acceptance at the run's temperature.

p and q must be the distributions the tokens are drawn from: after temperature, top-k and
top-p, in the order of the engine that drew them (`ORDERS`):
    vllm      temperature, then top-k, then top-p on the tempered probabilities
              (vllm/v1/sample/sampler.py, ops/topk_topp_sampler.py); SGLang's order too
    llamacpp  top-k, then top-p on the probabilities at temperature 1, then the temperature
              over what is left (llama-cpp-python's llama.py `_init_sampler`: penalties, top_k,
              typical, top_p, min_p, temp, dist; llama.cpp's llama-sampling.cpp keeps the
              top-p tokens until their running sum first reaches p)
What each engine returns as a logprob (`KINDS`):
    vllm      processed, when started with --logprobs-mode processed_logprobs (regen serve
              adds it; the default raw_logprobs is the model's own distribution); a speculating
              server is left raw (regen serve does not add it there: spec_metrics.py)
    sglang    after temperature, before top-k/top-p (sglang/srt/layers/sampler.py; unless
              SGLANG_RETURN_ORIGINAL_LOGPROB is set), so it is the drawn one without truncation
    llamacpp  llama-cpp-python: the raw model's (llama.py logits_to_logprobs over its scores),
              the drawn one only at temperature 1 without truncation (score --target-model
              recomputes the drawn one: target_probs.py)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from regen.fleet.engine_defaults import LLAMACPP_NEUTRAL

KINDS = {"vllm": "processed", "sglang": "temperature", "llamacpp": "raw"}
ORDERS = ("vllm", "llamacpp")  # where the temperature comes: first, or after top-k/top-p
# The other sampler settings, at the values that leave the draw as temperature, top-k and
# top-p make it (llama.cpp's names, vLLM's repetition_penalty, any logit_bias)
OTHER_NEUTRAL = {
    **{k: v for k, v in LLAMACPP_NEUTRAL.items() if k not in ("temperature", "top_p", "top_k")},
    "repetition_penalty": 1.0,
    "logit_bias": None,
}


@dataclass(frozen=True)
class DrawnAt:
    """The sampling an answer was drawn with, from its `meta.sampling` (None: unknown, the
    server's default)."""

    temperature: float | None
    top_p: float | None = None
    top_k: int | None = None
    logprobs: str = "processed"  # what the engine's logprobs are (KINDS)
    order: str = "vllm"  # how temperature, top-k and top-p were applied (ORDERS)
    others: str | None = None  # other sampler settings that changed the draw, or not recorded

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
            return (
                "the engine returned the raw model's logprobs (llama-cpp-python; vLLM "
                "without --logprobs-mode processed_logprobs, as on a speculating server), "
                f"not those at temperature {self.temperature} with top-k/top-p"
            )
        if self.logprobs == "temperature" and self.truncated:
            return "the engine (SGLang) returns logprobs before top-k/top-p"
        return None


GREEDY_DEFAULT = DrawnAt(0.0)  # a row built without a record (tests): greedy


def drawn_at(raw: dict[str, Any]) -> DrawnAt:
    """A completion record's sampling; llama.cpp's neutral values count where regen sent them."""
    meta = _dict(raw.get("meta"))
    sampling = _dict(meta.get("sampling"))
    values = {
        **_dict(sampling.get("neutral")),
        **{k: v for k, v in sampling.items() if v is not None},
    }
    engine = _dict(meta.get("engine")).get("name")
    kind = KINDS.get(engine or "", "processed")
    if engine == "vllm" and meta.get("speculative_decoding"):
        kind = "raw"  # regen serve leaves a speculating vLLM in raw mode (spec_metrics.py)
    order = "llamacpp" if engine == "llamacpp" else "vllm"
    return DrawnAt(
        _number(values.get("temperature")),
        _number(values.get("top_p")),
        _whole(values.get("top_k")),
        kind,
        order,
        _others({**values, **_dict(sampling.get("extra"))}, engine),
    )


def _others(values: dict[str, Any], engine: str | None) -> str | None:
    """The sampler settings besides temperature, top-k and top-p that changed the draw (a
    batch file's min_p, a penalty), or which llama.cpp setting the record does not give (its
    server's own default, min_p 0.05 and repeat_penalty 1.1, applied then)."""
    changed = [
        f"{k} {values[k]}"
        for k, neutral in OTHER_NEUTRAL.items()
        if values.get(k) not in (None, {}, neutral)
    ]
    if changed:
        return "drawn with " + ", ".join(changed)
    unsent = [
        k
        for k in OTHER_NEUTRAL
        if engine == "llamacpp" and k in LLAMACPP_NEUTRAL and values.get(k) is None
    ]
    return f"the record does not say the {', '.join(unsent)} it was drawn with" if unsent else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _whole(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


ROWS_AT_ONCE = 64  # a block of [64, vocab] float64 arrays: 25 MB each for a 49K vocabulary


def drawn_logprobs(logits: Any, tokens: Any, at: DrawnAt) -> Any:
    """log q(token) per row of `logits` ([rows, vocab]) under temperature, top-k and top-p in
    the order the engine applies them (`at.order`; a token cut by top-k/top-p gets -inf); a
    block of rows at a time."""
    import numpy as np

    tokens = np.asarray(tokens)
    block = _llamacpp_block if at.order == "llamacpp" else _drawn_block
    return (
        np.concatenate(
            [
                block(logits[i : i + ROWS_AT_ONCE], tokens[i : i + ROWS_AT_ONCE], at)
                for i in range(0, len(tokens), ROWS_AT_ONCE)
            ]
        )
        if len(tokens)
        else np.zeros(0)
    )


def _drawn_block(logits: Any, tokens: Any, at: DrawnAt) -> Any:
    """vLLM's order: temperature, then top-k, then top-p on the tempered probabilities."""
    import numpy as np

    z = np.asarray(logits, dtype=np.float64) / float(at.temperature or 1.0)
    z = _top_k(z, at.top_k)
    logq = _log_softmax(z)
    if at.top_p is not None and at.top_p < 1:
        logq = np.where(_top_p(logq, at.top_p), logq, -np.inf)
        logq = logq - np.log(np.exp(logq).sum(axis=1, keepdims=True))
    return logq[np.arange(z.shape[0]), tokens]


def _llamacpp_block(logits: Any, tokens: Any, at: DrawnAt) -> Any:
    """llama.cpp's order: top-k, then top-p on the probabilities at temperature 1 of the
    tokens top-k left, then the temperature over the tokens both left."""
    import numpy as np

    z = _top_k(np.asarray(logits, dtype=np.float64), at.top_k)
    if at.top_p is not None and at.top_p < 1:
        z = np.where(_top_p(_log_softmax(z), at.top_p), z, -np.inf)
    logq = _log_softmax(z / float(at.temperature or 1.0))
    return logq[np.arange(z.shape[0]), tokens]


def _top_k(z: Any, k: int | None) -> Any:
    """-inf below the k-th largest of each row (none when k is unset, 0 or the vocabulary)."""
    import numpy as np

    if k and 0 < k < z.shape[1]:
        kth = np.partition(z, -k, axis=1)[:, -k][:, None]
        z = np.where(z < kth, -np.inf, z)
    return z


def _log_softmax(z: Any) -> Any:
    import numpy as np

    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _top_p(logq: Any, p: float) -> Any:
    """Which tokens top-p keeps: ranked by probability, each whose higher-ranked tokens hold
    less than p (llama.cpp's "until the running sum reaches p", that token included)."""
    import numpy as np

    order = np.argsort(-logq, axis=1)
    probs = np.exp(np.take_along_axis(logq, order, axis=1))
    before = np.cumsum(probs, axis=1) - probs  # mass of the tokens ranked above
    keep = np.zeros_like(logq, dtype=bool)
    np.put_along_axis(keep, order, before < p, axis=1)
    return keep


def acceptances(draft_logq: Any, target_logp: list[float]) -> list[float]:
    """min(1, q(x)/p(x)) per answer token."""
    import numpy as np

    ratio = np.exp(np.minimum(np.asarray(draft_logq) - np.asarray(target_logp), 0.0))
    return ratio.tolist()
