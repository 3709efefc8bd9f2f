"""The OpenAI / vLLM batch request format, read as a prompt record.

One line of a batch file (`openai.batches`, `vllm run-batch`) is
`{"custom_id": ..., "method": "POST", "url": "/v1/chat/completions", "body": {...}}`.
It becomes a regen prompt: `custom_id` is the id (a resume finds it again), the body's
`messages` and `tools` are the prompt, and the body's sampling is kept per record.
`model` and streaming settings are the run's business (--model, --stream), so they are
not taken from the body. `n` above 1 is this prompt's number of samples (each its own
request, sample 0..n-1), in place of --samples-per-prompt.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from regen.errors import InputError

CHAT_ENDPOINT = "/v1/chat/completions"
SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "seed")
RUN_FIELDS = {"model", "messages", "tools", "stream", "stream_options"}


def is_batch_request(record: dict[str, Any]) -> bool:
    return "custom_id" in record and "body" in record


def from_batch_request(record: dict[str, Any]) -> dict[str, Any]:
    """The prompt record for one batch line; raises InputError naming what is wrong."""
    url = record.get("url", CHAT_ENDPOINT)
    if not isinstance(url, str) or not url.rstrip("/").endswith("/chat/completions"):
        raise InputError(
            f"batch request for {url!r}: only {CHAT_ENDPOINT} requests can be regenerated",
            kind="unsupported_endpoint",
        )
    body = record["body"]
    if not isinstance(body, dict):
        raise InputError("batch request 'body' must be an object", kind="bad_type")
    n = body.get("n", 1)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"batch request asks for n={n!r} choices", kind="bad_sampling")
    out: dict[str, Any] = {"id": record["custom_id"], "messages": body.get("messages")}
    if n > 1:  # n choices are n samples of this prompt (sample 0..n-1), one request each
        out["samples"] = n
    if out["messages"] is None:
        raise InputError("batch request body has no 'messages'", kind="no_messages")
    if body.get("tools") is not None:
        out["tools"] = body["tools"]
    if isinstance(body.get("model"), str):  # not sent (the run's model is), but counted
        out["model"] = body["model"]
    sampling = _sampling(body)
    if sampling:
        out["sampling"] = sampling
    return out


def _sampling(body: dict[str, Any]) -> dict[str, Any]:
    sampling = {k: body[k] for k in SAMPLING_FIELDS if body.get(k) is not None}
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        sampling["max_tokens"] = max_tokens
    kwargs = dict(body.get("chat_template_kwargs") or {})
    if "enable_thinking" in kwargs:
        sampling["thinking"] = bool(kwargs.pop("enable_thinking"))
    taken = {*SAMPLING_FIELDS, "max_tokens", "max_completion_tokens", "chat_template_kwargs"}
    # everything else (stop, min_p, presence_penalty, logit_bias ...) is sent as given
    extra = {k: v for k, v in body.items() if k not in taken | RUN_FIELDS and k != "n"}
    if kwargs:
        extra["chat_template_kwargs"] = kwargs
    if extra:
        sampling["extra"] = extra
    return sampling


def batch_models(lines: Iterable[bytes]) -> list[str] | None:
    """The models the batch requests among `lines` name, or None if the first record is not
    a batch request. Every request goes to the run's model: the header says so when the
    file asks for another, rather than dropping its `model` silently."""
    models: set[str] = set()
    for number, raw in enumerate(line for line in lines if line.strip()):
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(record, dict) or not is_batch_request(record):
            if number == 0:
                return None
            continue
        body = record["body"]
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            models.add(body["model"])
    return sorted(models)
