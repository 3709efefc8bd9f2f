"""Faults a fake server plays instead of, or in the middle of, an answer; with a dialect,
worded the way that engine words them (see dialects.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from regen.testing.dialects import DIALECTS, Dialect
from regen.testing.fake_behaviour import Behaviour


def dialect_of(behaviour: Behaviour) -> Dialect | None:
    return DIALECTS.get(behaviour.dialect or "")


def error_response(
    behaviour: Behaviour, status: int, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    dialect = dialect_of(behaviour)
    body = dialect.error_body(status, message) if dialect else {"error": {"message": message}}
    return web.json_response(body, status=status, headers=headers)


def stream_error_event(status: int = 503) -> dict[str, Any]:
    """What both engines send after HTTP 200 when a streamed request fails (queue full, a
    timeout, an aborted or dead engine), before `data: [DONE]`.
    SG:entrypoints/openai/serving_chat.py:2568-2578,2799-2805;
    VL:entrypoints/openai/chat_completion/serving.py:482-507,947-953."""
    error = {"message": "The server is overloaded; request aborted", "type": "ServiceUnavailable"}
    return {"error": {**error, "param": None, "code": status}}


async def refused_stream(request: web.Request) -> web.StreamResponse:
    """HTTP 200, then an error event and [DONE] before any token (a full queue refusing)."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    try:
        await response.prepare(request)
        await response.write(b"data: " + orjson.dumps(stream_error_event()) + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
    except ConnectionResetError:  # aiohttp's ClientConnectionResetError
        # The client has gone (regen's closes on the error event; a withdrawn request may go
        # before the headers): no error of the fake's, so no traceback on its stderr.
        pass
    return response


async def fault_response(
    fault: str, behaviour: Behaviour, request: web.Request, body: dict[str, Any]
) -> web.StreamResponse | None:
    """The answer for a fault that replaces the whole response (None: answer normally; a
    hang never answers). Faults that cut a response short are the server's to play."""
    crash = behaviour.crash_on
    if crash is not None and crash in orjson.dumps(body.get("messages")).decode():
        return error_response(behaviour, 500, "list index out of range")
    if fault == "500":
        return error_response(behaviour, 500, "injected failure")
    if fault == "400":
        return error_response(behaviour, 400, "prompt is too long")
    if fault == "429":
        # Neither engine sends Retry-After (audit, row 18); the plain fake does.
        plain = behaviour.dialect is None
        headers = {"Retry-After": str(behaviour.retry_after)} if plain else None
        return error_response(behaviour, 429, "slow down", headers)
    if fault in ("stream_error", "stream_refused") and not body.get("stream"):
        return error_response(behaviour, 503, "The server is overloaded; request aborted")
    if fault == "stream_refused":
        return await refused_stream(request)
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


# VL:renderers/online_renderer.py:265-270 (0.32.0): `tools` without `tool_choice` means "auto"
NO_AUTO_TOOLS = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)


def refusal(behaviour: Behaviour, body: dict[str, Any], prompt_tokens: int) -> web.Response | None:
    """A request the dialect's engine refuses with a 400 before generating."""
    dialect = dialect_of(behaviour)
    if dialect is None:
        return None
    streamed_ids = body.get("stream") and body.get("return_token_ids")
    if streamed_ids and dialect.stream_token_ids == "refuse":  # SG:.../serving_chat.py:1309-1320
        return error_response(behaviour, 400, "return_token_ids is not supported with streaming")
    if body.get("tools") and dialect.name == "vllm" and not behaviour.tool_parser:
        return error_response(behaviour, 400, NO_AUTO_TOOLS)
    max_tokens = body.get("max_tokens") or 0
    too_long = prompt_tokens >= behaviour.context
    if dialect.overflow == "reject" and prompt_tokens + max_tokens > behaviour.context:
        too_long = True
    if too_long:
        message = dialect.overflow_message(prompt_tokens, max_tokens, behaviour.context)
        return error_response(behaviour, 400, message)
    return None


def room(behaviour: Behaviour, prompt_tokens: int) -> int:
    """The most tokens an answer may have: a clamping engine lowers max_tokens to what fits."""
    dialect = dialect_of(behaviour)
    if dialect is not None and dialect.overflow == "clamp":
        return behaviour.context - prompt_tokens
    return 10**9


def cut_short(behaviour: Behaviour, fault: str, answer: dict[str, Any]) -> dict[str, Any]:
    """An answer the engine aborted (HTTP 200): half the text, an abort finish reason."""
    dialect = dialect_of(behaviour)
    if fault == "abort":
        reason = dialect.abort_reasons[0] if dialect and dialect.abort_reasons else "abort"
    elif fault == "finish_error":
        reason = "error"  # VL:v1/engine/__init__.py:49-67
    else:
        return answer
    text = answer["content"]
    return {**answer, "content": text[: len(text) // 2], "finish_reason": reason}
