"""What "the server's default" sampling is on each engine, and how regen makes llama.cpp
sample as vLLM and SGLang do.

vLLM and SGLang apply to a field a request leaves out the model's `generation_config`
(vLLM's `--generation-config auto`, SGLang's `--sampling-defaults model`), and where it sets
none, neutral values: temperature 1, top_p 1, no top-k, no min-p, no penalties.
llama-cpp-python's server fills every field a request leaves out with llama.cpp's own
sampler (llama_cpp/server/types.py in 0.3.x): temperature 0.8, top_p 0.95, top_k 40,
min_p 0.05 and repeat_penalty 1.1. The repeat penalty applies at temperature 0 as well, so
even greedy answers are not the model's own argmax (scored with the same model as the
draft: top-1 0.78 with it, 0.96 without). A GGUF carries no generation_config, so regen
sends the neutral values for every field the request leaves out (`with_neutral`), records
them in `meta.sampling.neutral`, and the start-up header says so (`server_default_note`).
"""

from __future__ import annotations

from typing import Any

LLAMACPP_OWN = {
    "temperature": 0.8,
    "top_p": 0.95,
    "top_k": 40,
    "min_p": 0.05,
    "repeat_penalty": 1.1,
}
# Every sampler knob of llama.cpp's servers, at the value that leaves the model's
# distribution as it is (top_k 0: no top-k; mirostat 0: off).
LLAMACPP_NEUTRAL = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "mirostat_mode": 0,
}
NEUTRAL = {"llamacpp": LLAMACPP_NEUTRAL}


def neutral_fields(engine: str, body: dict[str, Any]) -> dict[str, Any]:
    """The fields regen adds to a chat request `body` for `engine`: the neutral value of
    each knob the body leaves out (what the user set is sent as set)."""
    return {k: v for k, v in NEUTRAL.get(engine, {}).items() if body.get(k) is None}


def with_neutral(engine: str, body: dict[str, Any]) -> dict[str, Any]:
    added = neutral_fields(engine, body)
    return {**body, **added} if added else body


def server_default_note(engine: dict[str, Any], sampling: dict[str, Any] | None = None) -> str:
    """What a field left unset means on one engine of the fleet (an entry of the manifest's
    `engines`), for the start-up header. `sampling`: the run's (a field set there is not
    unset, so llama.cpp's line lists only what regen sends in its place)."""
    name = engine.get("name")
    if name == "llamacpp":
        given = {**(sampling or {}), **((sampling or {}).get("extra") or {})}
        sent = " ".join(f"{k}={v}" for k, v in neutral_fields("llamacpp", given).items())
        own = ", ".join(f"{k} {v}" for k, v in LLAMACPP_OWN.items() if given.get(k) is None)
        return f"on llamacpp, regen sends {sent} (llama.cpp's own: {own})"
    if name == "sglang":
        reported = engine.get("sampling_defaults")
        return f"on sglang, {reported or SGLANG_DEFAULT}"
    if name == "vllm":
        return "on vllm, the model's generation_config (vLLM's neutral values where it sets none)"
    return f"on {name}, whatever that server applies"


SGLANG_DEFAULT = "the model's generation_config (SGLang's neutral values where it sets none)"


def sglang_defaults(server_info: dict[str, Any]) -> str | None:
    """What SGLang's /get_server_info says it applies to an unset field: its
    --preferred-sampling-params, else --sampling-defaults (model: the generation_config;
    openai: neutral values)."""
    preferred = server_info.get("preferred_sampling_params")
    if preferred:
        return f"--preferred-sampling-params {preferred}"
    mode = server_info.get("sampling_defaults")
    if mode == "openai":
        return "neutral values (--sampling-defaults openai: the model's generation_config unused)"
    if mode == "model":
        return SGLANG_DEFAULT
    return None
