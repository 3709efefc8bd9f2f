"""A fake OpenAI-compatible server for fault injection and fleet simulation.

A real HTTP server (aiohttp) on 127.0.0.1. Each instance has a capacity (`slots` requests
served at once; the rest queue, as in a real engine) and a service time per output token,
and a script of faults: 500s, 429 with Retry-After, a connection reset in the middle of the
response, a hang. Answers are deterministic functions of the request, so tests can check
what was stored. Run one as a process with `python -m regen.testing.fake_server`.

Its parts: what it answers (fake_answers.py), how it streams it (fake_stream.py), its faults
(fake_faults.py), a batching engine's clock (fake_engine.py) and /metrics (fake_metrics.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import time
from typing import Any

import orjson
from aiohttp import web

from regen.testing.auth import bearer_auth
from regen.testing.fake_answers import answer_tokens, chat_response, prompt_words, text_response
from regen.testing.fake_behaviour import Behaviour, echo_answer
from regen.testing.fake_engine import EngineCurve, FakeEngine
from regen.testing.fake_faults import cut_short, dialect_of, fault_response, refusal, room
from regen.testing.fake_metrics import metrics_text
from regen.testing.fake_stream import reset_midway, send_paced, send_stream
from regen.testing.fake_tools import tool_caller
from regen.testing.loop_thread import LoopThread

__all__ = ["Behaviour", "FakeEngine", "FakeServer", "answer_tokens", "echo_answer"]


class FakeServer:
    def __init__(self, behaviour: Behaviour | None = None, port: int = 0) -> None:
        self.behaviour = behaviour or Behaviour()
        self.port = port
        self.requests: list[dict[str, Any]] = []
        self.served = 0
        # Wall-clock (time.time) marks for benchmarks in other processes: /stats reports them.
        self.first_request_at: float | None = None
        self.last_request_at: float | None = None
        self.last_served_at: float | None = None
        self.served_at: list[float] = []
        self.requested_at: list[float] = []
        self.tokens_served = 0
        self.in_flight = self.peak_in_flight = 0  # chat requests being handled at once
        self._faults = itertools.cycle(self.behaviour.faults or ["ok"])
        self._slots: asyncio.Semaphore | None = None
        # With an engine curve, a batching scheduler replaces the fixed slots (fake_engine.py).
        self.engine = FakeEngine(self.behaviour.engine) if self.behaviour.engine else None
        self._runner: web.AppRunner | None = None
        self._background = LoopThread("fake server")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- handlers ------------------------------------------------------------------------
    async def models(self, request: web.Request) -> web.Response:
        if self.behaviour.models_hang:
            await asyncio.sleep(3600)
        return web.json_response({"object": "list", "data": [{"id": self.behaviour.model}]})

    async def info(self, request: web.Request) -> web.Response:
        """The dialect's version endpoint (vLLM /version, SGLang /get_server_info)."""
        dialect = dialect_of(self.behaviour)
        assert dialect is not None
        b = self.behaviour
        parser = "qwen25" if b.tool_parser else None  # what SGLang's server args say
        info = dialect.info(request.path, b.deterministic, b.context, parser)
        if self.engine is not None and dialect.name == "sglang":
            # SG:entrypoints/http_server.py get_server_info: server args + scheduler info
            info["max_running_requests"] = self.engine.curve.max_running
            info["max_total_num_tokens"] = self.engine.curve.kv_tokens
        return web.json_response(info)

    async def metrics(self, request: web.Request) -> web.Response:
        """The engine's Prometheus /metrics, in its dialect's names (fake_metrics.py)."""
        assert self.engine is not None
        text = metrics_text(self.behaviour.dialect, self.engine, self.behaviour.model)
        return web.Response(text=text, content_type="text/plain")

    async def stats(self, request: web.Request) -> web.Response:
        """Counters and wall-clock marks; `?times=1` adds every completion's time."""
        data: dict[str, Any] = {
            "requests": len(self.requests),
            "served": self.served,
            "tokens_served": self.tokens_served,
            "first_request_at": self.first_request_at,
            "last_request_at": self.last_request_at,
            "last_served_at": self.last_served_at,
        }
        if request.query.get("times"):
            data["served_at"] = self.served_at
            data["requested_at"] = self.requested_at
        return web.json_response(data)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await self._chat(request)
        finally:
            self.in_flight -= 1

    async def _take(self, request: web.Request) -> dict[str, Any]:
        """Read and keep a request's body, and mark when it came."""
        self.last_request_at = time.time()
        self.requested_at.append(self.last_request_at)
        if self.first_request_at is None:
            self.first_request_at = self.last_request_at
        body = orjson.loads(await request.read())
        self.requests.append(body)
        return body

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """/v1/completions (a prompt, not messages), with the same faults as chat."""
        body = await self._take(request)
        faulty = await fault_response(next(self._faults), self.behaviour, request, body)
        if faulty is not None:
            return faulty
        self.served += 1
        return web.json_response(text_response(body))

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._take(request)
        fault = next(self._faults)
        faulty = await fault_response(fault, self.behaviour, request, body)
        if faulty is not None:
            return faulty
        assert self._slots is not None
        slots = self._slots if self.engine is None else contextlib.nullcontext()
        async with slots:
            answer = cut_short(self.behaviour, fault, self.behaviour.answer(body))
            words = prompt_words(body) if self.engine is not None else []
            if self.engine is not None:
                answer = {**answer, "prompt_tokens": len(words)}
            prompt = answer.get("prompt_tokens", 10)
            refused = refusal(self.behaviour, body, prompt)
            if refused is not None:
                return refused
            wanted = answer.get("tokens", 8)
            tokens = min(wanted, body.get("max_tokens", 10**9), room(self.behaviour, prompt))
            if tokens < wanted:  # cut off by max_tokens, as an engine reports it
                answer = {**answer, "finish_reason": "length"}
            delay = self.behaviour.base_latency + tokens * self.behaviour.seconds_per_token
            data = chat_response(self.behaviour, body, answer, tokens)
            if self.engine is not None and body.get("stream") and fault == "ok":
                # streamed as it decodes, as an engine does
                job = self.engine.submit(words, tokens)
                response = await send_paced(request, data, self.engine, job)
                self._served(tokens)
                return response
            if self.engine is not None:
                await self.engine.generate(words, tokens)
            elif delay:
                await asyncio.sleep(delay)
            if body.get("stream"):
                response, whole = await send_stream(request, self.behaviour, data, fault)
                if whole:
                    self._served(data["usage"]["completion_tokens"])
                return response
            payload = orjson.dumps(data)
            if fault == "reset":
                return await reset_midway(request, payload)
            self._served(tokens)
            return web.Response(body=payload, content_type="application/json")

    def _served(self, tokens: int) -> None:
        self.served += 1
        self.tokens_served += tokens
        self.last_served_at = time.time()
        self.served_at.append(self.last_served_at)

    # -- lifecycle -----------------------------------------------------------------------
    def app(self) -> web.Application:
        auth = bearer_auth(lambda: self.behaviour.api_key)
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[auth])
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_get("/stats", self.stats)
        if self.engine is not None:
            app.router.add_get("/metrics", self.metrics)
        dialect = dialect_of(self.behaviour)
        for path in dialect.info_paths if dialect else ():
            app.router.add_get(path, self.info)
        return app

    async def start_async(self) -> None:
        self._slots = asyncio.Semaphore(self.behaviour.slots)
        # A request whose client went away is cancelled, as vLLM and SGLang abort it.
        self._runner = web.AppRunner(self.app(), shutdown_timeout=0.1, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop_async(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> FakeServer:
        """Serve from a background thread (so a test's main thread can run generate)."""
        self._background.start(self.start_async, self.stop_async)
        return self

    def stop(self) -> None:
        """Stop serving; connections in flight are cut, like a killed server."""
        self._background.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--seconds-per-token", type=float, default=0.0)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument(
        "--tokens-jitter",
        type=float,
        default=0.0,
        help="vary each answer's length uniformly within tokens*(1±J), decided by a hash of "
        "the prompt so every client sees the same work",
    )
    parser.add_argument(
        "--tokens-sigma",
        type=float,
        default=0.0,
        help="instead: log-normal answer lengths with median --tokens and this sigma (a wide, "
        "long-tailed mix like a thinking model's), also decided by a hash of the prompt",
    )
    parser.add_argument("--base-latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--pad-bytes", type=int, default=0)
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--dialect", choices=["vllm", "sglang", "llamacpp"], default=None)
    parser.add_argument(
        "--engine",
        default=None,
        metavar="JSON",
        help="a batching engine instead of --slots/--seconds-per-token: EngineCurve fields as "
        'JSON, e.g. \'{"max_running": 128, "kv_tokens": 60000}\' ("{}": the defaults)',
    )
    parser.add_argument(
        "--tool-caller",
        action="store_true",
        help="a target that calls tools: get_weather on the last word of the user's message, "
        "then an answer from the tool's result (the agent-trace paths, which the embedded "
        "model never takes)",
    )
    parser.add_argument(
        "--faults", default=None, metavar="JSON", help='cycled per request, e.g. \'["ok", "500"]\''
    )
    args = parser.parse_args()

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        echoed = echo_answer(body)
        size = answer_tokens(echoed["content"], args.tokens, args.tokens_jitter, args.tokens_sigma)
        return {**echoed, "tokens": size}

    behaviour = Behaviour(
        model=args.model,
        slots=args.slots,
        seconds_per_token=args.seconds_per_token,
        base_latency=args.base_latency,
        pad_bytes=args.pad_bytes,
        answer=tool_caller() if args.tool_caller else answer,
        dialect=args.dialect,
        engine=EngineCurve(**orjson.loads(args.engine)) if args.engine is not None else None,
        faults=orjson.loads(args.faults) if args.faults else [],
    )
    server = FakeServer(behaviour, port=args.port)

    async def run() -> None:
        await server.start_async()
        print(f"fake server on {server.url}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


if __name__ == "__main__":
    main()
