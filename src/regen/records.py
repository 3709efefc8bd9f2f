"""The records that flow through regen, and their one codec.

In: a `Prompt` (what `regen prepare` writes, one line of the prompt file, and what a run
reads back), or a `BadLine` that cannot be one. Out: a `Completion` per finished (prompt,
sample) in completions/, an `ErrorRecord` per failure or unusable line in errors/. The output
records are typed structs written with `encode_line` and read back with `decode_completion` /
`decode_error`; their fields, in this order, are docs/records.md's reference.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

import msgspec
import xxhash

Key = int  # xxh3_64 of "id\x1fsample": compact enough to hold millions in memory


def record_key(prompt_id: str, sample: int) -> Key:
    """The exactly-once key of one (prompt, sample). 64 bits: a collision among 10^7 keys
    has odds of about 3e-6, far below any other failure; the files keep the full id."""
    return xxhash.xxh3_64_intdigest(f"{prompt_id}\x1f{sample}".encode())


NO_SOURCE = "(none)"


def source_name(source: dict[str, Any] | None) -> str:
    """What reports call a prompt's source: the recipe's `name` for it (prepare records it),
    else the dataset or file it came from, else NO_SOURCE."""
    if isinstance(source, dict):
        for key in ("name", "dataset"):
            if source.get(key):
                return str(source[key])
    return NO_SOURCE


# -- in ----------------------------------------------------------------------------------
@dataclass(slots=True)
class Prompt:
    """One prompt: the conversation up to (not including) the answer to make. `prepare`
    builds it from a dataset row (with `meta`: its category and the row's other columns);
    a run reads it from its input `line`, with the record's own `sampling` overrides."""

    id: str
    messages: list[dict]
    tools: list[dict] | None = None
    source: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    line: int = 0  # the input line it was read from (1-based; 0: not read from a file)
    sampling: dict[str, Any] | None = None  # per-record overrides
    samples: int | None = None  # this prompt's own sample count (a batch request's n)
    asked_model: str | None = None  # a batch request's `model`: the run sends its own
    ignored: tuple[str, ...] = ()  # top-level fields of the line that generate does not read

    @property
    def category(self) -> str | None:
        label = self.meta.get("category")
        return label if isinstance(label, str) else None

    def to_dict(self) -> dict[str, Any]:
        """The prompt file's line."""
        out: dict[str, Any] = {"id": self.id, "messages": self.messages}
        if self.tools:
            out["tools"] = self.tools
        out["source"] = self.source
        out["meta"] = self.meta
        return out


@dataclass(slots=True)
class BadLine:
    """An input line that cannot become a Prompt; it goes to errors/ with its line number."""

    line: int
    kind: str
    message: str
    id: str | None = None


@dataclass(slots=True)
class Finished:
    """A line whose every sample is already in the output files: not parsed any further."""

    id: str
    line: int


@dataclass(slots=True)
class WorkItem:
    """One (prompt, sample) to generate."""

    prompt: Prompt
    sample: int


# -- out ---------------------------------------------------------------------------------
class Usage(msgspec.Struct):
    prompt_tokens: int
    completion_tokens: int


class TokenIds(msgspec.Struct):
    """With --return-token-ids: the ids the server tokenised and generated, as it said."""

    prompt: list[int] | None
    completion: list[int]  # from a stream, an array('i') until it is encoded


class RecordMeta(msgspec.Struct, kw_only=True, omit_defaults=True):
    server: str
    model: str
    sampling: dict[str, Any]  # the sampling actually used, server defaults as None
    attempts: int
    latency_s: float
    line: int  # the input line of the prompt
    engine: dict[str, Any] | None = None  # name and version of the engine that answered
    seed_honoured: bool | None = None  # with a seed: whether that engine honours it
    max_tokens_lowered_to: int | None = None  # the context left less room than max_tokens
    turns: list[dict] | None = None  # per generated turn, with --regenerate-turns all
    # the serving drafter's acceptance on this answer, as vLLM reports it per request
    speculative_decoding: dict[str, Any] | None = None
    # roles the engine's server does not take, sent as others: {"developer": "system"}
    roles_sent: dict[str, str] | None = None


class Completion(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A completions/ line. `id` and `sample` come first: a resume reads only those."""

    id: str
    sample: int
    messages: list[dict]  # the prompt, then the generated assistant turn(s)
    tools: list[dict] | None = None
    finish_reason: str | None
    usage: Usage
    source: dict[str, Any] | None = None
    category: str | None = None
    token_ids: TokenIds | None = None
    # with --logprobs: the logprob of each token of the (last) answer, as the engine gave it
    logprobs: list[float] | None = None
    meta: RecordMeta


class ErrorRecord(msgspec.Struct, kw_only=True):
    """An errors/ line: a (prompt, sample) that could not be completed, or (`sample` None)
    an unusable input line."""

    id: str | None
    sample: int | None
    line: int
    error: dict[str, Any]  # type, message, and where known status and server
    attempts: int


Record = Completion | ErrorRecord


def _plain(value: Any) -> Any:
    """What msgspec does not encode itself: a streamed answer's ids, kept as an array('i')
    (4 bytes a token) until this moment."""
    if isinstance(value, array):
        return value.tolist()
    raise NotImplementedError(f"cannot encode {type(value).__name__} in a record")


_encoder = msgspec.json.Encoder(enc_hook=_plain)
_completions = msgspec.json.Decoder(Completion)
_errors = msgspec.json.Decoder(ErrorRecord)


def encode_line(record: Record) -> bytes:
    """One record as one JSON line (written with a single write: a kill leaves whole lines)."""
    return _encoder.encode(record) + b"\n"


def decode_completion(line: bytes | str) -> Completion:
    return _completions.decode(line)


def decode_error(line: bytes | str) -> ErrorRecord:
    return _errors.decode(line)
