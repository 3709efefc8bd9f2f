"""What a fake server does: its capacity, speed, answer, and the faults it injects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from regen.testing.fake_engine import EngineCurve

Answer = Callable[[dict[str, Any]], dict[str, Any]]


def echo_answer(body: dict[str, Any]) -> dict[str, Any]:
    """The default answer: names the last user message, so tests can check the pairing."""
    last_user = next(m for m in reversed(body["messages"]) if m["role"] == "user")
    text = last_user["content"] if isinstance(last_user["content"], str) else "[blocks]"
    return {"content": f"answer to: {text}", "tokens": 8}  # and "prompt_tokens" (default 10)


@dataclass
class Behaviour:
    model: str = "fake-model"
    slots: int = 64
    seconds_per_token: float = 0.0
    base_latency: float = 0.0  # seconds per request before the first token (prefill)
    reasoning: str | None = None  # "split": reasoning_content field; "inline": <think> in content
    finish_reason: str = "stop"
    answer: Answer = echo_answer
    # cycled per request: ok|500|429|reset|hang|400, stall (a stream that stops midway),
    # html (200 text/html: a login page), status (200 JSON that is no completion), 401,
    # echo (a 400 whose body echoes the request headers, as debug gateways do), and the
    # engines' own: stream_error (after HTTP 200, half the answer, then an error event and
    # [DONE]; a 503 body when not streamed), stream_refused (the same before any token),
    # abort (HTTP 200, half an answer, the dialect's abort finish reason), finish_error
    # (vLLM's "error" finish reason), done_early ([DONE], no finish reason)
    faults: list[str] = field(default_factory=list)
    retry_after: float = 0.2
    pad_bytes: int = 0  # extra response bytes, for client-cost benchmarks
    models_hang: bool = False
    return_token_ids: bool = False
    api_key: str | None = None  # when set, a request without `Bearer <api_key>` gets a 401
    # An engine's wording (see dialects.py): "sglang" | "vllm" | "llamacpp"; None is the plain
    # fake (vLLM's token-id shape, reasoning_content, no version endpoint).
    dialect: str | None = None
    # vLLM run with --speculative-config (this many draft tokens a step) and
    # --per-request-spec-decode-metrics detailed: answers carry metrics.speculative_decoding;
    # with the sglang dialect, a speculating SGLang: sglext.spec_tokens_details when asked
    spec_tokens: int | None = None
    context: int = 32768  # the context length a dialect checks prompt + max_tokens against
    deterministic: bool = False  # SGLang's --enable-deterministic-inference
    # Runs a tool-call parser (vLLM: --enable-auto-tool-choice --tool-call-parser; SGLang:
    # --tool-call-parser). Without one the vllm dialect refuses a request with tools (400)
    # and the sglang dialect's server info says tool_call_parser null.
    tool_parser: bool = True
    # A request whose messages hold this text answers HTTP 500 in a crash's words, every
    # time (a chat template that raises on that one conversation); the others are answered.
    crash_on: str | None = None
    keep_alive: float | None = None  # a stalled stream sends `: keep-alive` this often (vLLM)
    stream_write_size: int = 0  # a stream's bytes in writes of this size (0: one per event)
    # A batching engine on a scaled clock instead of `slots` and `seconds_per_token`: decode
    # time grows with the batch, a KV cache with preemption, a prefix cache, /metrics.
    engine: EngineCurve | None = None
