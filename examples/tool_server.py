"""A tool server for `regen generate --tool-server`: the contract in docs/generate.md.

Each POST names one call (conversation_id, turn, index, call_id, name, arguments) and gets
{"content": ...} or, for a tool it does not have or bad arguments, {"error": ...}. Replace
the TOOLS table with your own sandbox. It keeps the answer it gave each call (named by
conversation, turn and index), so a call that a restarted run sends again gets the same one.

    python examples/tool_server.py --port 8123
    regen generate ... --regenerate-turns all --tool-server http://127.0.0.1:8123/call
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from aiohttp import web


def get_weather(city: str) -> str:
    # a fixed, made-up forecast: deterministic, so reruns answer alike
    return f"{10 + len(city) % 15}C and {'sunny' if len(city) % 2 else 'cloudy'} in {city}"


TOOLS: dict[str, Callable[..., str]] = {"get_weather": get_weather}


def make_app() -> web.Application:
    answered: dict[tuple[Any, ...], dict[str, str]] = {}

    async def call(request: web.Request) -> web.Response:
        body = await request.json()
        key = (body.get("conversation_id"), body.get("turn"), body.get("index"))
        if key not in answered:
            answered[key] = run_tool(body.get("name"), body.get("arguments"))
        return web.json_response(answered[key])

    app = web.Application()
    app.router.add_post("/call", call)
    return app


def run_tool(name: Any, arguments: Any) -> dict[str, str]:
    tool = TOOLS.get(name)
    if tool is None:
        return {"error": f"no tool named {name!r}"}
    if not isinstance(arguments, dict):
        return {"error": f"arguments must be a JSON object, got {arguments!r}"}
    try:
        return {"content": tool(**arguments)}
    except TypeError as exc:  # wrong or missing arguments: the model's mistake, told to it
        return {"error": str(exc)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8123)
    args = parser.parse_args()
    web.run_app(make_app(), host=args.host, port=args.port, print=print)


if __name__ == "__main__":
    main()
