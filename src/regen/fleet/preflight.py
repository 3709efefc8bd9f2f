"""Check every server before any prompt is read: reachable, OpenAI-compatible, and serving
the model we expect. Fails in seconds with a message that says what to fix.

A server that does not answer at all (refused, timed out) is not a configuration error: one
of eight rebooting must not stop a restart. The run starts with those that answer and
probes the others; only when none answers does it refuse, as a fleet fault (exit 5).
"""

from __future__ import annotations

import asyncio

from regen.errors import (
    ConfigError,
    FleetUnavailable,
    PermanentError,
    RetryableError,
    ServerError,
    ServerRefused,
)
from regen.fleet.http_errors import AUTH_STATUSES
from regen.fleet.openai_env import AUTH_HINT
from regen.fleet.response import parse_chat_response
from regen.fleet.server import Server


async def resolve_model(
    servers: list[Server], expected: str | None, timeout: float = 10.0
) -> tuple[str, dict[Server, str]]:
    """The model to request, and the servers that did not answer (with why)."""
    results = await asyncio.gather(
        *(s.models(timeout=timeout) for s in servers), return_exceptions=True
    )
    problems: list[str] = []
    auth_refused = False
    served: dict[str, list[str]] = {}
    down: dict[Server, str] = {}
    for server, result in zip(servers, results, strict=True):
        if isinstance(result, RetryableError):
            down[server] = result.message
        elif isinstance(result, ServerError):
            problems.append(f"{server.url}: {result.message}")
            auth_refused = auth_refused or result.status in AUTH_STATUSES
        elif isinstance(result, BaseException):
            raise result
        else:
            served[server.url] = result
    if problems:
        raise ConfigError(
            "preflight failed for "
            + ", ".join(p.split(": ")[0] for p in problems)
            + ":\n  "
            + "\n  ".join(problems),
            hint=AUTH_HINT
            if auth_refused
            else "check the --servers URLs and that each server is up "
            "(it must answer GET <url>/v1/models)",
        )
    if not served:
        raise FleetUnavailable(
            "no server answers:\n  " + "\n  ".join(f"{s.url}: {why}" for s, why in down.items()),
            hint="start the servers (each must answer GET <url>/v1/models) and run the same "
            "command again: `regen serve` starts a fleet, and without --servers regen "
            "starts its embedded model",
        )
    model = expected or _single_model(served)
    missing = [url for url, models in served.items() if model not in models]
    if missing:
        raise ConfigError(
            f"model {model!r} is not served by "
            + ", ".join(missing)
            + "; they serve: "
            + "; ".join(f"{u}: {served[u]}" for u in missing),
            hint="pass --model with a name every server lists, or fix the fleet",
        )
    return model, down


def _single_model(served: dict[str, list[str]]) -> str:
    first_url, first_models = next(iter(served.items()))
    if not first_models:
        raise ConfigError(f"{first_url} lists no models at /v1/models", hint="pass --model NAME")
    return first_models[0]


async def check_token_ids(server: Server, model: str) -> bool:
    """Whether the server returns token ids when asked (`return_token_ids`: vLLM >= 0.10.2
    and SGLang answer them, each in its own shape). SGLang refuses them in a stream with a
    400: that stops the run here, in one line with the fix."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 1,
        "return_token_ids": True,
    }
    try:
        data = await server.chat(body)
    except PermanentError as err:
        if not server.timeouts.stream:
            raise
        raise ConfigError(
            f"--stream with --return-token-ids: {server.url} refuses token ids in a stream "
            f"({err.message})",
            hint="drop --stream (SGLang does not stream token ids; vLLM does), or drop "
            "--return-token-ids",
        ) from None
    generated = parse_chat_response(data, server.name)
    return generated.prompt_token_ids is not None and generated.completion_token_ids is not None


PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "regen_probe",
        "description": "A tool regen offers once to see whether the server takes tools.",
        "parameters": {"type": "object", "properties": {}},
    },
}


async def tools_refused(server: Server, model: str) -> str | None:
    """Why `server` cannot answer a request with `tools`, or None. SGLang says whether it runs
    a tool-call parser (/get_server_info; without one it answers, calls as text); vLLM is
    asked one one-token request with a tool, which it refuses with HTTP 400 when started
    without --enable-auto-tool-choice. llama.cpp's server takes tools by its chat format, and
    an engine regen cannot identify is not asked (its requests are the run's own)."""
    engine = server.engine
    if engine.name == "sglang" and engine.parses_tools is False:
        return "SGLang runs without --tool-call-parser: each call would be text in the answer"
    if engine.name != "vllm":
        return None
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [PROBE_TOOL],
        "max_tokens": 1,
    }
    try:
        await server.chat(body)
    except PermanentError as err:
        return err.message
    except (RetryableError, ServerRefused):
        return None  # not the tools' doing: the run's own retries and health deal with it
    return None
