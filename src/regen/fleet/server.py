"""One OpenAI-compatible inference server: its HTTP session, and its state in the rotation.

The server owns that state (slots in use, a pause asked for by a 429/503, its circuit
breaker, refusal count, liveness checks and counters); the dispatcher asks it (`can_take`,
`record_failure`, `take_out`, ...) and never writes those fields itself. How HTTP answers
and failures map onto the error tree is in `http_errors.py`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from regen import redact
from regen.errors import (
    PermanentError,
    RequestTimeout,
    ServerError,
    ServerRefused,
    TransportError,
    Withdrawn,
)
from regen.fleet.engine import UNKNOWN, EngineInfo
from regen.fleet.engine_defaults import with_neutral
from regen.fleet.history_fields import with_history_fields
from regen.fleet.http_errors import aborted_answer, decode_body, map_errors
from regen.fleet.roles import with_roles
from regen.fleet.rotation import Rotation
from regen.fleet.sglang_spec import asking_for_spec_details
from regen.fleet.stats import LATENCY_BUCKETS, ServerStats
from regen.fleet.stream import StallWatch, StreamAccumulator
from regen.fleet.stream_pace import ReadPacer
from regen.fleet.stream_progress import CURRENT
from regen.fleet.timeouts import Timeouts
from regen.fleet.waiting_streams import WaitingStreams

CHAT_PATH = "/v1/chat/completions"
# Where a busy server is asked whether it is alive, by engine (else /v1/models). Every route
# of llama-cpp-python's server that uses the model, /v1/models among them, waits for the
# lock each generation holds to its end (llama_cpp/server/app.py, get_llama_proxy), so a
# server generating long answers would miss every check; its OpenAPI page takes no lock.
LIVENESS_PATHS = {"llamacpp": "/openapi.json"}

# Bytes aiohttp buffers a connection (twice this before it stops reading the socket). Its
# default, 64 KiB, held up to 128 KiB a stream whenever the client fell behind: with 4,096
# streams, half a GB freed later in holes the answers' growing buffers could not reuse.
READ_BUFFER = 2**14

__all__ = ["CHAT_PATH", "LATENCY_BUCKETS", "Server", "ServerStats", "Timeouts"]


@dataclass(eq=False)
class Server(Rotation):
    url: str
    concurrency: int
    api_key: str | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    engine: EngineInfo = UNKNOWN  # which engine answers (see engine_info.py)
    # Live concurrency streams the answers of an engine that counts no tokens of its own, to
    # see tokens arrive while answers are in flight (tuning.py), where the request allows it.
    stream_to_measure: bool = False
    _session: aiohttp.ClientSession | None = None
    _requests: set[asyncio.Task] = field(default_factory=set)
    waiting: WaitingStreams = field(default_factory=WaitingStreams)  # withdrawn as levels fall

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        if self.url.endswith("/v1"):
            self.url = self.url[: -len("/v1")]
        redact.register(self.api_key)

    @property
    def name(self) -> str:
        return self.url.split("://", 1)[-1]

    # -- HTTP ----------------------------------------------------------------------------
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Content-Type": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            connector = aiohttp.TCPConnector(limit=self.concurrency + 8, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector, headers=headers, read_bufsize=READ_BUFFER
            )
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
        if path == CHAT_PATH:  # the body in this engine's dialect: llama.cpp's sampler
            # defaults replaced by neutral ones, earlier turns' reasoning under the field the
            # engine reads, roles it lacks sent as ones it has, SGLang asked for acceptance
            name = self.engine.name
            body = with_roles(name, with_history_fields(name, with_neutral(name, body)))
            body = asking_for_spec_details(name, body)
        streamed = path == CHAT_PATH and (
            self.timeouts.stream
            # token ids are not streamed by every engine (SGLang refuses them in a stream)
            or (self.stream_to_measure and not body.get("return_token_ids"))
        )
        post = self._post_stream if streamed else self._post_json
        request = asyncio.ensure_future(post(path, body))
        self._requests.add(request)
        try:
            data = await request
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self.waiting.was_withdrawn(request) and current and not current.cancelling():
                raise Withdrawn("withdrawn before its first token", server=self.name) from None
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
        if path in CHOICES_PATHS:
            self._check_completion(data)
        return data

    def _check_completion(self, data: Any) -> None:
        """A 200 that is no completion (a gateway's status page: no prompt causes this), or
        one the engine cut short (finish_reason abort/error), is not an answer."""
        if not _has_choices(data):
            raise ServerRefused(
                f"HTTP 200 JSON without 'choices': {redact.scrub(str(data)[:200])}",
                server=self.name,
                status=200,
                hint="the URL answers JSON but not an OpenAI chat completion: point --servers "
                "at an OpenAI-compatible server (http://host:port)",
            )
        aborted = aborted_answer(data, self.name)
        if aborted is not None:
            raise aborted

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
        stream = StreamAccumulator(self.name)
        started = asyncio.get_running_loop().time()
        self.waiting.sent(task := asyncio.current_task(), started)
        try:
            with map_errors(self.name, self.timeouts.request, stall=self.timeouts.stall):
                async with self.session().post(
                    self.url + path, data=orjson.dumps(body), timeout=timeout
                ) as resp:
                    if resp.status >= 400 or resp.content_type != "text/event-stream":
                        # an error, a login page, or a whole JSON body (a server that does
                        # not stream, a gateway's status page): read as without a stream
                        return decode_body(resp, await resp.read(), self.name)
                    return await self._read_stream(resp, stream, started)
        except ServerError as err:  # after tokens: a failed request, not a refusal
            err.after_tokens = stream.has_tokens
            raise
        finally:
            self.waiting.started(task)

    async def _read_stream(
        self, resp: aiohttp.ClientResponse, stream: StreamAccumulator, started: float
    ) -> Any:
        """Only data events count as progress. Silence is cut by one stall timer a stream
        (aiohttp's read timeout, which waited for the headers, would re-arm a timer at every
        read: a tenth of a streamed token's cost); a server that sends nothing but keep-alive
        comments (vLLM's --sse-keep-alive-interval) while its engine hangs is cut here, at
        the first comment past the stall timeout. A slow stream is read a few events at a
        time (stream_pace.py)."""
        transport = None
        if resp.connection is not None:
            resp.connection.protocol.read_timeout = None  # type: ignore[union-attr]
            transport = resp.connection.transport
        loop = asyncio.get_running_loop()
        watch = StallWatch(resp.content, self.timeouts.stall, self.name)
        pacer = ReadPacer(transport, self.timeouts.stall, started)
        progress = CURRENT.get()  # (the end game's, near the end of a run)
        try:
            async for data in resp.content.iter_any():  # all that came: lines split in bulk
                events = stream.feed_bytes(data)
                if events:
                    now = watch.last_data = loop.time()
                    if progress is not None:
                        progress.heard(events, now)
                    pacer.after_read(events, now, stream.finish_reason is not None)
                    self.stats.streamed_events += events
                    if not stream.started:
                        stream.started = True
                        self.waiting.started(asyncio.current_task())
                elif loop.time() - watch.last_data > self.timeouts.stall:
                    raise RequestTimeout(
                        f"the response stream stalled: no data for {self.timeouts.stall:.0f}s "
                        "(only keep-alive comments)",
                        server=self.name,
                    )
        finally:
            watch.cancel()
            pacer.close()
        stream.end()
        answer = stream.response()
        if self.stream_to_measure and (stream.usage or {}).get("completion_tokens") is None:
            # An engine that streams no usage (llama-cpp-python's server): its answers go
            # back to plain ones, which carry it; live concurrency then reads the answers.
            # (An empty answer, usage 0, is not that.)
            self.stream_to_measure = False
        return answer

    async def alive(self, timeout: float) -> None:
        """Answer a health check, or raise as `models` does."""
        path = LIVENESS_PATHS.get(self.engine.name)
        if path is None:
            await self.models(timeout)
        else:
            await self._get_json(path, timeout)

    async def get(self, path: str, timeout: float = 10.0) -> Any:
        """GET `path` and return the parsed JSON body (engine and version endpoints)."""
        return await self._get_json(path, timeout)

    async def get_text(self, path: str, timeout: float = 5.0) -> str:
        """GET `path` as text (an engine's Prometheus /metrics)."""
        with map_errors(self.name, timeout):
            async with self.session().get(
                self.url + path, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                payload = await resp.read()
                if resp.status >= 400:
                    decode_body(resp, payload, self.name)  # raises the status's error
                return payload.decode("utf-8", "replace")

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
