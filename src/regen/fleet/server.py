"""One OpenAI-compatible inference server: its HTTP session, and its state in the rotation.

The server owns that state (slots in use, a pause asked for by a 429/503, its circuit
breaker, refusal count, liveness checks and counters); the dispatcher asks it (`can_take`,
`record_failure`, `take_out`, ...) and never writes those fields itself. How HTTP answers
and failures map onto the error tree is in `http_errors.py`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from regen import redact
from regen.errors import (
    Overloaded,
    PermanentError,
    RetryableError,
    ServerError,
    ServerRefused,
    TransportError,
)
from regen.fleet.health import CircuitBreaker, Liveness, Refusals, ServerState
from regen.fleet.http_errors import API_CONTENT_TYPES, decode_body, map_errors
from regen.fleet.stats import LATENCY_BUCKETS, ServerStats
from regen.fleet.stream import StreamAccumulator

CHAT_PATH = "/v1/chat/completions"

__all__ = ["CHAT_PATH", "LATENCY_BUCKETS", "Server", "ServerStats", "Timeouts"]


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


@dataclass(eq=False)
class Server:
    url: str
    concurrency: int
    api_key: str | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    stats: ServerStats = field(default_factory=ServerStats)
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)
    refusals: Refusals = field(default_factory=Refusals)
    liveness: Liveness = field(default_factory=Liveness)
    _in_flight: int = 0
    _paused_until: float = 0.0  # monotonic time: a 429/503 asked us to wait until then
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

    # -- its place in the rotation -------------------------------------------------------
    @property
    def available(self) -> bool:
        return self.breaker.allows_requests

    @property
    def state(self) -> ServerState:
        return self.breaker.state

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def load(self) -> float:
        return self._in_flight / self.concurrency

    def can_take(self, now: float) -> bool:
        """In rotation, with a free slot, and not asked to wait."""
        return self.available and self._in_flight < self.concurrency and self._paused_until <= now

    def claim(self) -> None:
        self._in_flight += 1

    def release(self) -> None:
        self._in_flight -= 1

    def record_success(self) -> None:
        self.breaker.record_success()
        self.refusals.reset()

    def record_retry(self) -> None:
        self.stats.retried += 1

    def record_refusal(self, error: ServerRefused) -> bool:
        """Count a refusal; True when it refuses every request (time to retire it)."""
        self._count_failure(error)
        return self.refusals.record(error.message, error.hint)

    def record_failure(self, error: RetryableError, pause: float) -> bool:
        """A 429/503 pauses new requests (Retry-After, else `pause` s): the server is alive
        and asked us to wait. Other failures count towards the circuit breaker; True when
        this one opened it."""
        self._count_failure(error)
        if isinstance(error, Overloaded):
            wait = error.retry_after if error.retry_after is not None else pause
            self._paused_until = max(self._paused_until, time.monotonic() + wait)
            return False
        return self.breaker.record_failure(error.kind)

    def _count_failure(self, error: ServerError) -> None:
        self.stats.failed += 1
        self.stats.last_error = f"{error.kind}: {error.message}"

    def take_out(self, why: str) -> None:
        if self.breaker.allows_requests:
            self.breaker.trip(why)

    def refuse(self, answer: str) -> None:
        """Out for good: never probed back."""
        self.breaker.refuse(answer)

    def bring_back(self) -> None:
        self.breaker.close()
        self.liveness.misses = 0

    def probe_due(self, now: float) -> bool:
        """Out of rotation and due a probe; claims it (one probe at a time)."""
        if not self.breaker.probe_due(now):
            return False
        self.breaker.next_probe_at = float("inf")
        return True

    def probe_failed(self, reason: str | None = None) -> None:
        self.breaker.probe_failed(time.monotonic())
        if reason is not None:
            self.breaker.reason = reason

    def liveness_due(self, now: float, interval: float) -> bool:
        """Busy and in rotation, and not checked for `interval` s; claims the check."""
        due = self.available and self._in_flight > 0 and self.liveness.due(now, interval)
        if due:
            self.liveness.begin()
        return due

    def liveness_answered(self) -> None:
        self.liveness.answered(time.monotonic())

    def liveness_missed(self, allowed: int) -> bool:
        """Count a missed check; True (and the count starts again) at `allowed` in a row."""
        if self.liveness.missed(time.monotonic()) < allowed:
            return False
        self.liveness.misses = 0
        return True

    # -- HTTP ----------------------------------------------------------------------------
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
        """POST /v1/chat/completions and return the parsed JSON body."""
        return await self.post(CHAT_PATH, body)

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST `path` and return the parsed JSON body (a chat completion is streamed with
        --stream and checked to be one).

        The HTTP call runs as its own task so that the health checker can abort every request
        on a server that stopped answering (see `abort_requests`) and they go elsewhere.
        """
        streamed = self.timeouts.stream and path == CHAT_PATH
        post = self._post_stream if streamed else self._post_json
        request = asyncio.ensure_future(post(path, body))
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
        if path in CHOICES_PATHS and not _has_choices(data):
            # JSON, but not a completion (a gateway's status page): no prompt causes this
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
                return decode_body(resp, payload, self.name)

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
                    return decode_body(resp, await resp.read(), self.name)
                stream = StreamAccumulator(self.name)
                async for line in resp.content:
                    stream.feed(line)
                return stream.response()

    async def _get_json(self, path: str, timeout: float) -> Any:
        with map_errors(self.name, timeout):
            async with self.session().get(
                self.url + path, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                return decode_body(resp, await resp.read(), self.name)


# Paths whose answer is an OpenAI completion: a 200 without `choices` is not one.
CHOICES_PATHS = {CHAT_PATH, "/v1/completions"}


def _has_choices(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("choices"), list)
