"""Turn an OpenAI-compatible chat completion response into what we store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from regen.chat import split_inline_think
from regen.errors import PermanentError
from regen.fleet.sglang_spec import spec_from_sglext


@dataclass(slots=True)
class Generated:
    content: str
    reasoning: str | None
    tool_calls: list[dict] | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    prompt_token_ids: list[int] | None = None
    # a list, or from a stream an array('i'): 4 bytes a token until the record is encoded
    completion_token_ids: Sequence[int] | None = None
    # vLLM's per-request `metrics.speculative_decoding` (the serving drafter's acceptance on
    # this answer) when it runs with --per-request-spec-decode-metrics, or SGLang's counts in
    # the same shape (sglang_spec.py); None otherwise
    spec_decoding: dict[str, Any] | None = None
    logprobs: list[float] | None = None  # asked with `logprobs: true`, one per answer token

    def assistant_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning is not None:
            message["reasoning_content"] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


def parse_chat_response(data: Any, server: str) -> Generated:
    """Read choices[0] and usage; reasoning comes from `reasoning_content`, `reasoning`, or
    inline `<think>` markup in the content (split the same way in all three cases)."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise PermanentError(
            f"response has no choices[0].message: {str(data)[:200]}", server=server
        ) from exc
    content = message.get("content") or ""
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning is None:
        reasoning, content = split_inline_think(content)
    usage = data.get("usage") or {}
    return Generated(
        content=content,
        reasoning=reasoning,
        tool_calls=message.get("tool_calls") or None,
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        prompt_token_ids=_first(data, choice, "prompt_token_ids"),
        completion_token_ids=_first(choice, message, "token_ids")
        or choice.get("response_token_ids"),
        spec_decoding=_spec_decoding(data) or spec_from_sglext(data),
        logprobs=token_logprobs(choice.get("logprobs"), server),
    )


LOGPROB_DIGITS = 5  # p to 1e-5 relative: far below any acceptance figure's noise


def token_logprobs(logprobs: Any, server: str) -> list[float] | None:
    """`choices[0].logprobs.content[i].logprob`, the OpenAI shape vLLM
    (chat_completion/protocol.py ChatCompletionLogProbs), SGLang (ChatCompletionTokenLogprob)
    and llama-cpp-python (llama_chat_format.py) all answer in; None when not asked."""
    if logprobs is None:
        return None
    try:
        return [round(float(entry["logprob"]), LOGPROB_DIGITS) for entry in logprobs["content"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise PermanentError(
            f"response logprobs are not choices[0].logprobs.content[].logprob: "
            f"{str(logprobs)[:200]}",
            server=server,
        ) from exc


def _spec_decoding(data: dict) -> dict[str, Any] | None:
    """vLLM 0.32+: `metrics.speculative_decoding`, null without the server flag, for n > 1
    and without speculation (VL:entrypoints/generate/base/protocol.py:100-129)."""
    metrics = data.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    return spec if isinstance(spec, dict) and spec.get("num_spec_steps") is not None else None


def combined_spec_decoding(turns: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One row's `speculative_decoding` over every turn regenerated for it (--regenerate-turns
    all: a request per turn, each with its own counts), in vLLM's own fields: the counts and
    histogram summed, the per-step arrays joined, the two means taken over the sums. One
    turn's metrics are returned as they came; turns at another draft length, as none."""
    specs = [t for t in turns if t is not None]
    if len(specs) <= 1:
        return specs[0] if specs else None
    k = specs[0]["num_spec_tokens"]
    if any(t["num_spec_tokens"] != k for t in specs):
        return None
    total = {
        name: sum(int(t[name]) for t in specs)
        for name in ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens")
    }
    steps, accepted, drafted = total.values()
    out: dict[str, Any] = {
        "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": [
            sum(c) for c in zip(*(t["acceptance_histogram"] for t in specs), strict=True)
        ],
        **total,
        "num_spec_tokens": k,
    }
    if all("per_step_accepted" in t for t in specs if t["num_spec_steps"]):
        for name in ("per_step_accepted", "per_step_drafted"):
            out[name] = [n for t in specs for n in t.get(name, [])]
    return out


def _first(outer: dict, inner: dict, key: str) -> Any:
    """Token ids where either engine puts them: vLLM answers a top-level `prompt_token_ids`
    and `choices[i].token_ids`; SGLang answers `choices[i].prompt_token_ids` and
    `choices[i].response_token_ids` (see docs/engines.md)."""
    value = outer.get(key)
    return value if value is not None else inner.get(key)
