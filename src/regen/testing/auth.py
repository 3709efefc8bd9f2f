"""API-key checking for the loopback test servers, as vLLM's and SGLang's `--api-key` do it:
a request without `Authorization: Bearer <key>` gets a 401 with an OpenAI-style error."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def bearer_auth(key: Callable[[], str | None]) -> Callable:
    """A middleware checking the key `key()` gives at request time (None: no key needed)."""

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        wanted = key()
        if wanted is not None and request.headers.get("Authorization") != f"Bearer {wanted}":
            error = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
            return web.json_response({"error": error}, status=401)
        return await handler(request)

    return auth
