"""Which engine answers, its version, and whether it honours a request's `seed`.

Asked once per server before the run: SGLang at /get_server_info (or /server_info), vLLM at
/version, llama.cpp's own server at /props; when regen started the fleet, FLEET.json names
the engine. The answer goes into the manifest and every record (`meta.engine`).

SGLang ignores `seed` unless its server runs with --enable-deterministic-inference
(sglang/srt/sampling/sampling_batch_info.py in 0.5.23): its samples still differ, but a seed
cannot reproduce them, so such records say `seed_honoured: false`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
from typing import Any

from regen.errors import PermanentError, RetryableError, ServerError, ServerRefused
from regen.fleet.engine import UNKNOWN, EngineInfo
from regen.fleet.engine_defaults import sglang_defaults
from regen.fleet.server import Server

# Probed in this order: the first that answers JSON names the engine.
PROBES = (
    ("/get_server_info", "sglang"),
    ("/server_info", "sglang"),
    ("/version", "vllm"),
    ("/props", "llamacpp"),
)


async def identify(server: Server, known: str | None = None, timeout: float = 5.0) -> EngineInfo:
    """The engine behind `server`; `known` is the engine FLEET.json (or the embedded server)
    names. Never fails: a server that says nothing is `unknown`."""
    for path, name in PROBES:
        if known is not None and name != known:
            continue
        try:
            answer = await server.get(path, timeout)
        except ServerError:
            continue
        if isinstance(answer, dict):
            return _read(name, answer)
    if known == "llamacpp":  # llama-cpp-python's server has no version endpoint
        return EngineInfo("llamacpp", _installed("llama_cpp_python"), seed_honoured=True)
    return EngineInfo(known, seed_honoured=known == "vllm") if known else UNKNOWN


def _read(name: str, answer: dict[str, Any]) -> EngineInfo:
    if name == "sglang":
        honoured = bool(answer.get("enable_deterministic_inference"))
        defaults = sglang_defaults(answer)
        parses = bool(answer["tool_call_parser"]) if "tool_call_parser" in answer else None
        return EngineInfo("sglang", _str(answer.get("version")), honoured, defaults, parses)
    if name == "llamacpp":
        return EngineInfo("llamacpp", _str(answer.get("build_info")), seed_honoured=True)
    return EngineInfo("vllm", _str(answer.get("version")), seed_honoured=True)


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


async def identify_fleet(servers: list[Server], known: str | None, seed: int | None) -> str | None:
    """Identify every available server (each remembers its engine); returns the one warning
    to show when a seed was asked for and some server will not honour it."""
    found = await asyncio.gather(*(identify(s, known) for s in servers if s.available))
    for server, info in zip([s for s in servers if s.available], found, strict=True):
        server.engine = info
    ignoring = [s.name for s in servers if s.engine.seed_honoured is False]
    if seed is None or not ignoring:
        return None
    return (
        f"--seed is ignored by {', '.join(ignoring)} (SGLang without "
        "--enable-deterministic-inference): samples cannot be reproduced from it; records "
        "say seed_honoured: false"
    )


def fleet_engines(servers: list[Server]) -> list[dict[str, Any]]:
    """For the manifest: each distinct engine and version in the fleet."""
    seen: list[dict[str, Any]] = []
    for server in servers:
        entry = {**server.engine.as_dict(), "seed_honoured": server.engine.seed_honoured}
        if server.engine.sampling_defaults is not None:
            entry["sampling_defaults"] = server.engine.sampling_defaults
        if entry not in seen:
            seen.append(entry)
    return seen


async def stated_limits(server: Server, timeout: float) -> tuple[int | None, int | None]:
    """(requests run at once, KV cache tokens) as SGLang's /get_server_info states them;
    vLLM states neither there (its max_num_seqs is in no endpoint; its cache size is in
    /metrics), so live concurrency starts it from concurrency.START."""
    if server.engine.name != "sglang":
        return None, None
    with contextlib.suppress(RetryableError, PermanentError, ServerRefused):
        info = await server.get("/get_server_info", timeout)
        if isinstance(info, dict):
            return _positive(info.get("max_running_requests")), _positive(
                info.get("max_total_num_tokens")
            )
    return None, None


def _positive(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and value > 0 else None
