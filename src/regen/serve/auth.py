"""The API key regen sends to the servers it starts, and where it came from.

An engine started with `-- --api-key K` (or vLLM inheriting VLLM_API_KEY from regen's
environment) answers 401 to every request without it, readiness checks included. So regen
sends: the key given after `--`, else the variable named by --api-key-env, else VLLM_API_KEY
for vLLM, else OPENAI_API_KEY. FLEET.json records the variable's name (never the key) for
`regen generate --fleet` and `regen serve --status`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from regen import redact
from regen.errors import ConfigError

API_KEY_VAR = "OPENAI_API_KEY"  # the OpenAI ecosystem's, as generate reads it too
VLLM_KEY_VAR = "VLLM_API_KEY"  # VL:entrypoints/serve/middleware/register.py:32-33


@dataclass(frozen=True)
class ServeKey:
    value: str | None
    env: str | None  # the variable that holds it, for FLEET.json (None: none holds it)

    def __repr__(self) -> str:  # never the key
        return f"ServeKey(env={self.env!r})"


def serve_key(
    engine: str, extra: list[str], api_key_env: str | None, env: Mapping[str, str] | None = None
) -> ServeKey:
    env = os.environ if env is None else env
    given = _key_after_dashes(extra)
    if api_key_env is not None:
        value = env.get(api_key_env)
        if not value:
            raise ConfigError(
                f"--api-key-env names {api_key_env}, but that variable is not set",
                hint=f"export {api_key_env}=... in the shell that runs regen serve",
            )
        if given is not None and given != value:
            raise ConfigError(
                f"the key after `-- --api-key` differs from ${api_key_env}",
                hint=f"give the servers the key that {api_key_env} holds",
            )
        return _registered(ServeKey(value, api_key_env))
    if given is not None:
        return _registered(ServeKey(given, None))
    for name in ((VLLM_KEY_VAR,) if engine == "vllm" else ()) + (API_KEY_VAR,):
        if env.get(name):
            return _registered(ServeKey(env[name], name))
    return ServeKey(None, None)


def _key_after_dashes(extra: list[str]) -> str | None:
    for i, arg in enumerate(extra):
        if arg == "--api-key" and i + 1 < len(extra):
            return extra[i + 1]
        if arg.startswith("--api-key="):
            return arg.split("=", 1)[1]
    return None


def _registered(key: ServeKey) -> ServeKey:
    redact.register(key.value)  # never in a message or a log line
    return key


def key_from_env(name: str | None) -> str | None:
    """The key a FLEET.json's servers want, from the variable it names (None when unset)."""
    return os.environ.get(name) if name else None
