"""The OpenAI ecosystem's environment, read the way the OpenAI SDK, vLLM's benchmarks and
curator read it: OPENAI_BASE_URL names the server when no --servers are given, and
OPENAI_API_KEY is the key when no --api-key-env is given. Explicit flags always win."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from regen.errors import ConfigError

BASE_URL_VAR = "OPENAI_BASE_URL"
API_KEY_VAR = "OPENAI_API_KEY"
AUTH_HINT = f"the server wants an API key: set {API_KEY_VAR} or --api-key-env"


def servers_from_env(local_model: Path | None, env: Mapping[str, str] | None = None) -> list[str]:
    """[$OPENAI_BASE_URL] when set, unless --local-model asks for the embedded server."""
    env = os.environ if env is None else env
    url = env.get(BASE_URL_VAR, "").strip()
    if not url or local_model is not None:
        return []
    return [url]


@dataclass(frozen=True)
class ApiKey:
    value: str | None
    source: str  # what the preflight line shows instead of the key

    def __repr__(self) -> str:  # never the key, even in a traceback
        return f"ApiKey(source={self.source!r})"


def resolve_api_key(
    api_key_env: str | None, embedded: bool, env: Mapping[str, str] | None = None
) -> ApiKey:
    """--api-key-env VAR wins; else $OPENAI_API_KEY for a fleet (never sent to the
    embedded server, which needs none)."""
    env = os.environ if env is None else env
    if api_key_env:
        key = env.get(api_key_env)
        if not key:
            raise ConfigError(
                f"--api-key-env names {api_key_env}, but that variable is not set",
                hint=f"export {api_key_env}=... in the shell that runs regen",
            )
        return ApiKey(key, f"${api_key_env} (--api-key-env)")
    if not embedded and env.get(API_KEY_VAR):
        return ApiKey(env[API_KEY_VAR], f"${API_KEY_VAR}")
    return ApiKey(None, "none")
