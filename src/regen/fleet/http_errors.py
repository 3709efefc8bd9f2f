"""HTTP answers and HTTP-library failures, mapped onto regen's exception tree. This is the
only place that looks at aiohttp errors and at error statuses: the retry decision elsewhere is
a type check."""

from __future__ import annotations

import asyncio
import errno
import re
import time
from typing import Any

import aiohttp
import orjson

from regen import redact
from regen.errors import (
    EngineAborted,
    Overloaded,
    PermanentError,
    PromptRejected,
    RequestTimeout,
    ServerError,
    ServerFault,
    ServerRefused,
    TransportError,
)
from regen.fleet.openai_env import AUTH_HINT

RETRY_LATER_STATUSES = {429, 503}
SERVER_FAULT_STATUSES = {408, 500, 502, 504}
AUTH_STATUSES = {401, 403}  # the server wants an API key (or a different one)
# The same answer whatever the prompt: a wrong key, URL or model, or a proxy in the way.
REFUSED_STATUSES = {*AUTH_STATUSES, 404, 405, 407}
API_CONTENT_TYPES = {"application/json", "text/event-stream"}


def decode_body(resp: aiohttp.ClientResponse, payload: bytes, server: str) -> Any:
    if resp.status >= 400:
        raise status_error(resp.status, payload, resp.headers.get("Retry-After"), server)
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        answer = redact.scrub(repr(payload[:200]))
        if resp.content_type not in API_CONTENT_TYPES:  # a login page, a proxy's banner
            raise ServerRefused(
                f"HTTP {resp.status} {resp.content_type} instead of JSON: {answer}",
                server=server,
                status=resp.status,
                hint="the URL reaches something other than the inference server (a login "
                "page or a proxy): point --servers at the server itself (http://host:port)",
            ) from exc
        raise ServerFault(
            f"HTTP {resp.status} with a body that is not JSON: {answer}",
            server=server,
            status=resp.status,
        ) from exc


def status_error(status: int, payload: bytes, retry_after: str | None, server: str) -> ServerError:
    """The error for an HTTP error status; the server's own message is kept."""
    message = redact.scrub(f"HTTP {status}: {_server_message(payload)}")
    if status in REFUSED_STATUSES:
        return ServerRefused(message, server=server, status=status, hint=REFUSED_HINTS[status])
    if status in RETRY_LATER_STATUSES:
        return Overloaded(message, server=server, status=status, retry_after=_seconds(retry_after))
    if status >= 500 and REQUEST_INVALID.match(_server_message(payload)):
        return PromptRejected(message, server=server, status=status, hint=REJECTED_HINT)
    if status in SERVER_FAULT_STATUSES or status >= 500:
        return ServerFault(message, server=server, status=status)
    return PermanentError(message, server=server, status=status)


# llama-cpp-python's server answers every exception with HTTP 500, the request validation
# of its own schema among them (LC:server/errors.py:154-160,180-208 in 0.3.36: FastAPI's
# RequestValidationError reaches the handler a crash does), so a message it cannot read, a
# `developer` turn, is told from a fault by pydantic's report on the request body, all it
# says: "N validation error(s): {... 'loc': ('body', 'messages', 0, ...) ...}".
REQUEST_INVALID = re.compile(r"\d+ validation errors?:.*'loc': \('body',", re.S)
REJECTED_HINT = "the engine's server cannot read this prompt; the record says why"


def event_error(error: Any, server: str) -> ServerError:
    """The error for an error event inside a stream (`data: {"error": {...}}` after HTTP 200):
    its `code` is the status it would have had (503/429 overloaded and retried, 400
    permanent, 5xx a server fault); without a numeric code it is a server fault."""
    code = error.get("code") if isinstance(error, dict) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    return status_error(status, orjson.dumps({"error": error}), None, server)


# An answer the engine cut short but sent with HTTP 200 (SGLang's graceful aborts, vLLM's
# engine aborts and its "error" finish reason): never a finished sample.
ABORT_FINISH_REASONS = frozenset({"abort", "error"})


def aborted_answer(data: Any, server: str) -> EngineAborted | None:
    """The error for a completion whose choice the engine aborted, or None."""
    choices = data.get("choices") if isinstance(data, dict) else None
    for choice in choices if isinstance(choices, list) else []:
        reason = choice.get("finish_reason") if isinstance(choice, dict) else None
        if reason in ABORT_FINISH_REASONS:
            return EngineAborted(
                f"the engine cut the answer short (finish_reason {reason!r})",
                server=server,
                status=200,
            )
    return None


REFUSED_HINTS = {
    401: AUTH_HINT,
    403: f"{AUTH_HINT} (this key is not allowed to use this server or model)",
    404: "check the --servers URL (http://host:port, no extra path) and --model",
    405: "check the --servers URL: it does not reach an OpenAI-compatible API",
    407: "a proxy asks for credentials: bypass it for these hosts (NO_PROXY) or fix it",
}


class map_errors:
    """Context manager mapping aiohttp/asyncio failures onto the regen error tree."""

    def __init__(self, server: str, timeout: float, stall: float | None = None) -> None:
        self.server = server
        self.timeout = timeout
        self.stall = stall
        self.started = time.monotonic()

    def __enter__(self) -> map_errors:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None or isinstance(exc, ServerError | asyncio.CancelledError):
            return False
        if self.stall is not None and isinstance(exc, aiohttp.SocketTimeoutError):
            raise RequestTimeout(
                f"the response stream stalled: nothing for {self.stall:.0f}s", server=self.server
            ) from exc
        mapped = map_exception(exc, self.server, time.monotonic() - self.started)
        if mapped is None:
            return False
        raise mapped from exc


def map_exception(exc: BaseException, server: str, elapsed: float) -> ServerError | None:
    """Our error for an exception raised by the HTTP stack, or None if it is not one (a bug)."""
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return RequestTimeout(f"no complete answer after {elapsed:.0f}s", server=server)
    if isinstance(exc, aiohttp.ClientResponseError):
        return status_error(exc.status, exc.message.encode(), None, server)
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return TransportError(f"response broken off: {exc}", server=server)
    if isinstance(exc, aiohttp.ClientConnectorError) and _refused(exc.os_error):
        # aiohttp's own text ("Cannot connect to host ... ssl:default [Connect call failed")
        # says the same in words a user has to decode
        return TransportError(f"nothing listens on {exc.host}:{exc.port}", server=server)
    if isinstance(exc, aiohttp.ClientError | ConnectionError | OSError):
        return TransportError(redact.scrub(f"{type(exc).__name__}: {exc}"), server=server)
    return None


def _refused(error: OSError) -> bool:
    return isinstance(error, ConnectionRefusedError) or error.errno == errno.ECONNREFUSED


def _server_message(payload: bytes) -> str:
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return payload[:500].decode("utf-8", "replace")
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:500]
        return str(err)[:500]
    return str(data)[:500]


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from inference servers; fall back to our backoff
