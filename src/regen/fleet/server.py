"""One OpenAI-compatible inference server: its HTTP session, and the mapping of every
failure onto regen's exception tree (this is the only place that looks at aiohttp errors)."""

from __future__ import annotations

import asyncio
import bisect
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from regen import redact
from regen.errors import (
    Overloaded,
    PermanentError,
    RequestTimeout,
    ServerError,
    ServerFault,
    ServerRefused,
    TransportError,
)
from regen.fleet.health import CircuitBreaker, Refusals
from regen.fleet.openai_env import AUTH_HINT
from regen.fleet.stream import StreamAccumulator

# Upper bounds (seconds) of the request-latency histogram: from a short answer on a fast
# GPU to a 32K-token one queued behind others.
LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
RETRY_LATER_STATUSES = {429, 503}
SERVER_FAULT_STATUSES = {408, 500, 502, 504}
AUTH_STATUSES = {401, 403}  # the server wants an API key (or a different one)
# The same answer whatever the prompt: a wrong key, URL or model, or a proxy in the way.
REFUSED_STATUSES = {*AUTH_STATUSES, 404, 405, 407}
API_CONTENT_TYPES = {"application/json", "text/event-stream"}


@dataclass(frozen=True, slots=True)
class Timeouts:
    """`request`: a whole completion (a 4096-token answer at 30 tok/s takes ~140 s, so the
    default is far above that); `connect`: opening a connection; `stall`: the longest silence
    inside a streamed response (only with `stream`: a non-streamed answer is silent until it
    is whole, so there a hung server is found by the health checks instead)."""

    request: float = 1800.0
    connect: float = 10.0
    stall: float = 300.0
    stream: bool = False


@dataclass(slots=True)
class ServerStats:
    completed: int = 0
    failed: int = 0
    completion_tokens: int = 0
    latency_ewma: float = 0.0
    last_error: str | None = None
    retried: int = 0  # failed attempts that were sent again
    latency_counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    latency_sum: float = 0.0

    def record_success(self, latency: float, tokens: int) -> None:
        self.completed += 1
        self.completion_tokens += tokens
        self.latency_counts[bisect.bisect_left(LATENCY_BUCKETS, latency)] += 1
        self.latency_sum += latency
        alpha = 0.1 if self.latency_ewma else 1.0
        self.latency_ewma += alpha * (latency - self.latency_ewma)


@dataclass(eq=False)
class Server:
    url: str
    concurrency: int
    api_key: str | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    in_flight: int = 0
    paused_until: float = 0.0  # monotonic time: a 429/503 asked us to wait until then
    stats: ServerStats = field(default_factory=ServerStats)
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)
    refusals: Refusals = field(default_factory=Refusals)
    _session: aiohttp.ClientSession | None = None
    _requests: set[asyncio.Task] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        if self.url.endswith("/v1"):
            self.url = self.url[: -len("/v1")]
        redact.register(self.api_key)

    @property
    def name(self) -> str:
        return self.url.split("://", 1)[-1]

    @property
    def available(self) -> bool:
        return self.breaker.allows_requests

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Content-Type": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            connector = aiohttp.TCPConnector(limit=self.concurrency + 8, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, headers=headers)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def chat(self, body: dict[str, Any]) -> Any:
        """POST /v1/chat/completions and return the parsed JSON body.

        The HTTP call runs as its own task so that the health checker can abort every request
        on a server that stopped answering (see `abort_requests`) and they go elsewhere.
        """
        post = self._post_stream if self.timeouts.stream else self._post_json
        request = asyncio.ensure_future(post("/v1/chat/completions", body))
        self._requests.add(request)
        try:
            data = await request
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if request.cancelled() and current is not None and not current.cancelling():
                raise TransportError(
                    "server taken out of rotation mid-request; the request moves on",
                    server=self.name,
                ) from None
            raise
        finally:
            self._requests.discard(request)
            if not request.done():
                request.cancel()
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            # JSON, but not a chat completion (a gateway's status page): no prompt causes this
            raise ServerRefused(
                f"HTTP 200 JSON without 'choices': {redact.scrub(str(data)[:200])}",
                server=self.name,
                status=200,
                hint="the URL answers JSON but not an OpenAI chat completion: point --servers "
                "at an OpenAI-compatible server (http://host:port)",
            )
        return data

    def abort_requests(self) -> None:
        for request in list(self._requests):
            request.cancel()

    async def models(self, timeout: float = 10.0) -> list[str]:
        """The model ids the server reports at /v1/models."""
        data = await self._get_json("/v1/models", timeout)
        try:
            return [str(m["id"]) for m in data["data"]]
        except (KeyError, TypeError) as exc:
            raise PermanentError(
                f"/v1/models answered without a 'data' list of models: {str(data)[:200]}",
                server=self.name,
            ) from exc

    async def _post_json(self, path: str, body: dict[str, Any]) -> Any:
        timeout = aiohttp.ClientTimeout(
            total=self.timeouts.request, sock_connect=self.timeouts.connect
        )
        with map_errors(self.name, self.timeouts.request):
            async with self.session().post(
                self.url + path, data=orjson.dumps(body), timeout=timeout
            ) as resp:
                payload = await resp.read()
                return _decode(resp, payload, self.name)

    async def _post_stream(self, path: str, body: dict[str, Any]) -> Any:
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        timeout = aiohttp.ClientTimeout(
            total=self.timeouts.request,
            sock_connect=self.timeouts.connect,
            sock_read=self.timeouts.stall,
        )
        with map_errors(self.name, self.timeouts.request, stall=self.timeouts.stall):
            async with self.session().post(
                self.url + path, data=orjson.dumps(body), timeout=timeout
            ) as resp:
                if resp.status >= 400 or resp.content_type not in API_CONTENT_TYPES:
                    return _decode(resp, await resp.read(), self.name)
                stream = StreamAccumulator(self.name)
                async for line in resp.content:
                    stream.feed(line)
                return stream.response()

    async def _get_json(self, path: str, timeout: float) -> Any:
        with map_errors(self.name, timeout):
            async with self.session().get(
                self.url + path, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                return _decode(resp, await resp.read(), self.name)


def _decode(resp: aiohttp.ClientResponse, payload: bytes, server: str) -> Any:
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
    if status in SERVER_FAULT_STATUSES or status >= 500:
        return ServerFault(message, server=server, status=status)
    return PermanentError(message, server=server, status=status)


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
    if isinstance(exc, aiohttp.ClientError | ConnectionError | OSError):
        return TransportError(redact.scrub(f"{type(exc).__name__}: {exc}"), server=server)
    return None


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
