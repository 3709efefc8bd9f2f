"""The bodies a fake server sends: a chat completion for a request, and the same answer as
the SSE events of a stream, shaped the way SGLang and vLLM shape them."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from regen.testing.fake_behaviour import Behaviour


async def fault_response(
    fault: str, behaviour: Behaviour, request: web.Request
) -> web.Response | None:
    """The answer for a fault that replaces the whole response (None: answer normally; a
    hang never answers). Faults that cut a response short are the server's to play."""
    if fault == "500":
        return web.json_response({"error": {"message": "injected failure"}}, status=500)
    if fault == "400":
        return web.json_response({"error": {"message": "prompt is too long"}}, status=400)
    if fault == "429":
        headers = {"Retry-After": str(behaviour.retry_after)}
        return web.json_response({"error": {"message": "slow down"}}, status=429, headers=headers)
    if fault == "hang":
        await asyncio.sleep(3600)
    if fault == "html":
        page = "<html><head><title>Sign in</title></head><body>Log in</body></html>"
        return web.Response(text=page, content_type="text/html")
    if fault == "status":  # JSON, but not a completion: a gateway's status page
        return web.json_response({"status": "ok", "service": "gateway"})
    if fault == "401":
        return web.json_response({"error": {"message": "invalid api key"}}, status=401)
    if fault == "echo":
        headers = "\n".join(f"{k}: {v}" for k, v in request.headers.items())
        return web.json_response({"error": {"message": f"bad request; got {headers}"}}, status=400)
    return None


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
    content = answer["content"]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if answer.get("tool_calls"):
        message["tool_calls"] = answer["tool_calls"]
    reasoning = answer.get("reasoning", f"thinking about: {content[:40]}")
    if b.reasoning == "split":
        message["reasoning_content"] = reasoning
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
        "usage": {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens},
    }
    if b.return_token_ids and body.get("return_token_ids"):
        data["prompt_token_ids"] = list(range(10))
        choice["token_ids"] = list(range(100, 100 + tokens))
    return data


def stream_events(data: dict[str, Any]) -> list[dict[str, Any]]:
    """`data` as the chunks of a stream: the role, reasoning, content in pieces of 7
    characters, tool calls in pieces, the finish reason, then usage (the `[DONE]` line is the
    server's to send)."""
    choice = data["choices"][0]
    message = choice["message"]
    deltas: list[dict] = [{"role": "assistant"}]
    if "reasoning_content" in message:
        deltas.append({"reasoning_content": message["reasoning_content"]})
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
    events.append({"choices": [], "usage": data["usage"]})
    return events
