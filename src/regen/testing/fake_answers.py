"""The bodies a fake server sends: a chat completion for a request, and the same answer as
the SSE events of a stream, shaped the way SGLang and vLLM shape them."""

from __future__ import annotations

import math
import zlib
from statistics import NormalDist
from typing import Any

from regen.testing.dialects import DIALECTS
from regen.testing.fake_behaviour import Behaviour
from regen.testing.fake_spec import TIMINGS, sglang_details, spec_decoding


def text_response(body: dict[str, Any]) -> dict[str, Any]:
    """A /v1/completions answer that names its prompt; with `prompt_logprobs`, one entry per
    prompt token as vLLM sends them (the first is null: nothing comes before it)."""
    prompt = str(body.get("prompt", ""))
    choice: dict[str, Any] = {"index": 0, "text": f"answer to: {prompt}", "finish_reason": "stop"}
    if body.get("prompt_logprobs") is not None:
        words = prompt.split()
        choice["prompt_logprobs"] = [None] + [{"1": {"logprob": -1.0}} for _ in words[1:]]
    usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": 3}
    return {"object": "text_completion", "choices": [choice], "usage": usage}


def chat_response(
    behaviour: Behaviour, body: dict[str, Any], answer: dict[str, Any], tokens: int
) -> dict[str, Any]:
    """The non-streamed chat completion for `answer`, cut to `tokens` tokens."""
    b = behaviour
    dialect = DIALECTS.get(b.dialect or "")
    content = answer["content"]
    prompt = answer.get("prompt_tokens", 10)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if answer.get("tool_calls"):
        message["tool_calls"] = answer["tool_calls"]
    reasoning = answer.get("reasoning", f"thinking about: {content[:40]}")
    if b.reasoning == "split":
        message[dialect.reasoning_field if dialect else "reasoning_content"] = reasoning
    elif b.reasoning == "inline":
        message["content"] = f"<think>\n{reasoning}\n</think>\n\n{content}"
    if b.pad_bytes:
        message["content"] += " " + "x" * b.pad_bytes
    choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "finish_reason": answer.get("finish_reason", b.finish_reason),
    }
    data: dict[str, Any] = {
        "id": "cmpl-fake",
        "object": "chat.completion",
        "model": body.get("model"),
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": tokens,
            "total_tokens": prompt + tokens,
        },
    }
    if b.spec_tokens and dialect is not None and dialect.spec_counts == "sglext":
        _add_sglext(data, body, tokens, b.spec_tokens)
    elif b.spec_tokens and body.get("n", 1) == 1:
        data["metrics"] = {**TIMINGS, "speculative_decoding": spec_decoding(tokens, b.spec_tokens)}
    elif b.dialect == "vllm":
        data["metrics"] = None
    shape = dialect.token_ids if dialect else ("vllm" if b.return_token_ids else None)
    if shape is not None and body.get("return_token_ids"):
        prompt_ids, completion_ids = list(range(prompt)), list(range(100, 100 + tokens))
        if shape == "sglang":  # per choice: SG:entrypoints/openai/protocol.py:1318-1319
            choice["prompt_token_ids"], choice["response_token_ids"] = prompt_ids, completion_ids
        else:  # VL:entrypoints/openai/chat_completion/protocol.py:128,155
            data["prompt_token_ids"], choice["token_ids"] = prompt_ids, completion_ids
    if body.get("logprobs"):  # the OpenAI shape all three engines answer in
        choice["logprobs"] = {
            "content": [
                {"token": f"t{i}", "logprob": fake_logprob(i), "bytes": None, "top_logprobs": []}
                for i in range(tokens)
            ]
        }
    return data


def _add_sglext(data: dict[str, Any], body: dict[str, Any], tokens: int, k: int) -> None:
    """SGLang answers its counts at the response's top level, only when asked
    (SG:entrypoints/openai/serving_chat.py `_build_chat_response`; see fleet/sglang_spec.py)."""
    details = sglang_details(tokens, k)
    if body.get("return_spec_tokens_details") and details is not None:
        data["sglext"] = {"spec_tokens_details": details}


def fake_logprob(i: int) -> float:
    """The fake answer's logprob at token i: a known pattern a test can check."""
    return -0.25 * (i % 4)


def stream_events(data: dict[str, Any]) -> list[dict[str, Any]]:
    """`data` as the chunks of a stream: the role, reasoning, content in pieces of 7
    characters, tool calls in pieces, the finish reason, then usage (the `[DONE]` line is the
    server's to send). Token ids go the way vLLM streams them: the prompt's in the first
    chunk, each chunk's own in `choices[].token_ids` (VL:.../chat_completion/protocol.py:179,195).
    """
    choice = data["choices"][0]
    message = choice["message"]
    deltas: list[dict] = [{"role": "assistant"}]
    for field in ("reasoning_content", "reasoning"):
        if field in message:
            deltas.append({field: message[field]})
    text = message["content"]
    deltas += [{"content": text[i : i + 7]} for i in range(0, len(text), 7)]
    for n, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        head = {"index": n, "id": call["id"], "function": {"name": call["function"]["name"]}}
        deltas += [{"tool_calls": [head]}]
        deltas += [
            {"tool_calls": [{"index": n, "function": {"arguments": arguments[i : i + 5]}}]}
            for i in range(0, len(arguments), 5)
        ]
    events = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append(
        {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
    )
    if "token_ids" in choice:
        _spread_token_ids(events[:-1], data["prompt_token_ids"], choice["token_ids"])
    if data.get("sglext"):  # SGLang: a chunk of its own before the usage chunk
        events.append({"choices": [], "sglext": data["sglext"]})
    if "logprobs" in choice:
        _spread_logprobs(events[:-1], choice["logprobs"]["content"])
    last: dict[str, Any] = {"choices": [], "usage": data["usage"]}
    if data.get("metrics"):  # on the final usage chunk, without its null timings
        last["metrics"] = {k: v for k, v in data["metrics"].items() if v is not None}
    events.append(last)
    return events


def _spread_token_ids(events: list[dict], prompt_ids: list[int], ids: list[int]) -> None:
    events[0]["prompt_token_ids"] = prompt_ids
    step = -(-len(ids) // max(1, len(events) - 1))  # the role chunk carries none
    for n, event in enumerate(events):
        start = (n - 1) * step if n else 0
        event["choices"][0]["token_ids"] = ids[start : start + step] if n else []


def _spread_logprobs(events: list[dict], entries: list[dict]) -> None:
    """Each chunk after the role's carries its share, as `choices[].logprobs.content`."""
    step = -(-len(entries) // max(1, len(events) - 1))
    for n, event in enumerate(events[1:]):
        event["choices"][0]["logprobs"] = {"content": entries[n * step : (n + 1) * step]}


def prompt_words(body: dict[str, Any]) -> list[str]:
    """The fake engine's prompt tokens: the words of every message, in order (a shared
    system prompt or an earlier turn is then a shared prefix, as with a real tokenizer)."""
    words: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        words.append(f"<{message.get('role')}>")
        words.extend(content.split() if isinstance(content, str) else ["[blocks]"])
    return words


def answer_tokens(content: str, tokens: int, jitter: float = 0.0, sigma: float = 0.0) -> int:
    """An answer's length in tokens, decided by a hash of the answer so that every client
    (and the benchmark's own arithmetic) sees the same work: `tokens`, or uniform within
    tokens*(1±jitter), or log-normal with median `tokens` and `sigma`."""
    unit = zlib.crc32(content.encode()) / 0xFFFFFFFF  # in [0, 1]
    if sigma:
        z = NormalDist().inv_cdf(min(max(unit, 1e-9), 1 - 1e-9))
        return max(1, round(tokens * math.exp(sigma * z)))
    jitter = min(max(jitter, 0.0), 1.0)
    if not jitter:
        return tokens
    return max(1, round(tokens * (1 - jitter + 2 * jitter * unit)))
