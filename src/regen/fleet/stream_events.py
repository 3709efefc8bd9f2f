"""The fields of a streamed chat completion chunk that regen reads, as typed structs.

Decoding into these reads only what is named here and skips the rest (`id`, `model`,
`created`, a logprob entry's `token` and `top_logprobs`, SGLang's `matched_stop`, ...)
without building a dict for it: about half of an event's cost when every token is an event.
An event of the wrong shape (not an object, text that is not a string) fails to decode, and
the reader reports it.
"""

from __future__ import annotations

from typing import Any

import msgspec


class Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None  # SGLang, and vLLM before 0.10
    reasoning: str | None = None  # vLLM's name since
    tool_calls: list[dict[str, Any]] | None = None


class TokenLogprob(msgspec.Struct):
    logprob: float  # the rest of an entry (token, bytes, top_logprobs) is skipped


class Logprobs(msgspec.Struct):
    content: list[TokenLogprob] | None = None  # asked with `logprobs: true`: this chunk's own


class Choice(msgspec.Struct):
    delta: Delta | None = None
    token_ids: list[int] | None = None  # vLLM with return_token_ids: this chunk's own
    logprobs: Logprobs | None = None
    finish_reason: str | None = None


class Chunk(msgspec.Struct):
    choices: list[Choice] | None = None
    usage: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None  # vLLM: per request, on the final usage chunk
    prompt_token_ids: list[int] | None = None  # vLLM: on the first chunk
    sglext: dict[str, Any] | None = None  # SGLang's extensions, in a chunk of their own
    error: Any = None  # an engine's in-stream failure after the HTTP 200


decode_event = msgspec.json.Decoder(Chunk).decode
