"""An HTTP stand-in between regen and a real S3 server (moto), for upload fault injection.

A real HTTP server (aiohttp) on 127.0.0.1 that forwards every request to `upstream` and
returns its answer, except for requests matching a rule:
- "cut": read part of the request body, then drop the connection (an upload cut midway; the
  upstream never sees the request);
- "hold": forward the request (so the upstream has done it), then never answer (a client
  killed after its upload landed but before it heard so);
- "refuse": drop the connection at once (the bucket is unreachable);
- "no_conditions": answer a request with an `If-Match` or `If-None-Match` header 501
  NotImplemented, as S3-compatible stores without conditional writes do; forward the rest.
Rules are (method, substring of the path, action); the first match wins; set them any time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from regen.testing.loop_thread import LoopThread

HOP_HEADERS = {"transfer-encoding", "connection", "keep-alive", "content-length"}


@dataclass
class CutProxy:
    upstream: str
    rules: list[tuple[str, str, str]] = field(default_factory=list)
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, action)
    port: int = 0
    _background: LoopThread = field(default_factory=lambda: LoopThread("cut proxy"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def action(self, method: str, path: str) -> str:
        for rule_method, fragment, action in list(self.rules):
            if rule_method == method and fragment in path:
                return action
        return "pass"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        action = self.action(request.method, request.path)
        self.seen.append((request.method, request.path, action))
        assert request.transport is not None
        if action == "refuse":
            request.transport.abort()
            return web.Response(status=599)
        conditional = {"if-match", "if-none-match"} & {k.lower() for k in request.headers}
        if action == "no_conditions" and conditional:
            error = (
                "<Error><Code>NotImplemented</Code><Message>A header you provided implies "
                "functionality that is not implemented</Message></Error>"
            )
            return web.Response(status=501, text=error, content_type="application/xml")
        if action == "cut":
            await request.content.read(512)
            request.transport.abort()
            return web.Response(status=599)
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
            session.request(
                request.method,
                self.upstream + request.path_qs,
                headers=headers,
                data=body,
                allow_redirects=False,
            ) as answer,
        ):
            payload = await answer.read()
            if action == "hold":
                await asyncio.sleep(3600)  # cut when the proxy stops
            keep = {"content-length"} if request.method == "HEAD" else set()  # no body to count
            out = {
                k: v
                for k, v in answer.headers.items()
                if k.lower() not in HOP_HEADERS or k.lower() in keep
            }
            return web.Response(status=answer.status, headers=out, body=payload)

    async def _start(self) -> None:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        await self._runner.cleanup()

    def start(self) -> CutProxy:
        self._background.start(self._start, self._stop)
        return self

    def stop(self) -> None:
        self._background.stop()
