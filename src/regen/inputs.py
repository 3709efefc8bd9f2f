"""Read a prompt file for `regen generate`: one JSON record a line, streamed.

A record has an optional `id`, and `messages` (OpenAI style), `conversations` (ShareGPT
`from`/`value`, or role/content) or a plain `prompt` (one user turn), plus optional
`system`, `tools`, `sampling`, `source`, `meta` and `category` (what each top-level field
means: `regen.prompt_fields`).
A line of an OpenAI/vLLM batch file (`custom_id`, `url`, `body`) is read too
(`regen.batch_input`).
A trailing assistant turn is the old answer being regenerated, so it is dropped. A line that
cannot be used becomes a BadLine with its number and the reason: never a crash, never a
silent skip.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import xxhash

from regen.batch_input import from_batch_request, is_batch_request
from regen.chat import asks_nothing, no_user_text, normalise_messages
from regen.errors import ConfigError, InputError
from regen.format.part import WHOLE, Part
from regen.jsonio import canonical, is_file, iter_lines
from regen.prompt_fields import (
    ignored_fields,
    no_turns_hint,
    sampling_of,
    turns_of,
    with_category,
    with_system,
)
from regen.records import BadLine, Finished, Prompt
from regen.urls import is_url

log = logging.getLogger("regen.inputs")
SAMPLING_KEYS = {"temperature", "top_p", "top_k", "max_tokens", "thinking", "seed", "extra"}
# the lowest value each numeric field takes, and whether it must be an integer
# (lowest, highest or None, whole number): a prompt line's sampling and the flags alike
SAMPLING_RANGES: dict[str, tuple[int, int | None, bool]] = {
    "temperature": (0, None, False),
    "top_p": (0, 1, False),
    "top_k": (-1, None, True),  # -1: vLLM's "no top-k"
    "max_tokens": (1, None, True),
    "seed": (0, None, True),
}


def stable_id(messages: list[dict], tools: list[dict] | None) -> str:
    """An id derived from the prompt itself, so a rerun over the same file finds the same ids."""
    return "h" + xxhash.xxh3_128_hexdigest(canonical({"messages": messages, "tools": tools}))


def read_prompts(
    path: str | Path,
    is_finished: Callable[[str], bool] | None = None,
    part: Part = WHOLE,
    skip: Iterator[tuple[int, int]] | None = None,
) -> Iterator[Prompt | BadLine | Finished]:
    """Yield a Prompt or a BadLine for every non-blank line of the file that `part` owns.

    `is_finished(id)`: a record with an explicit id that is already done becomes a Finished
    marker without being normalised, so a resume over a million finished prompts is fast.
    `skip`: (first, last) runs of lines not to read at all (see `iter_lines`).
    """
    check_prompt_file(path)
    for number, raw in iter_lines(path, skip):
        if not raw.strip():
            continue
        try:
            entry: Prompt | Finished | BadLine | None = parse_record(raw, number, is_finished, part)
        except InputError as err:
            message = err.message if not err.hint else f"{err.message} ({err.hint})"
            entry = BadLine(line=number, kind=err.kind, message=message, id=err.record_id)
        except Exception as exc:  # a shape no check foresaw: this line only, never the run
            log.exception("line %d of %s could not be read", number, path)
            entry = BadLine(number, "unreadable_record", f"{type(exc).__name__}: {exc}"[:500])
        # an unusable line goes by its line number, whatever id it gave
        owner = None if isinstance(entry, BadLine) else getattr(entry, "id", None)
        if entry is not None and part.owns(owner, number):
            yield entry


def check_prompt_file(path: str | Path) -> None:
    """--prompts names one file; a directory or a missing path is said to be just that."""
    if is_file(path):
        return
    if not is_url(path) and Path(path).is_dir():
        raise ConfigError(
            f"--prompts {path} is a directory; it takes one prompt file",
            hint=f"pass a file inside it, or join them: `regen prepare --source '{path}/*.jsonl' "
            "-o prompts.jsonl`",
        )
    raise ConfigError(f"prompt file {path} does not exist", hint="check --prompts")


def parse_record(
    raw: bytes,
    line: int,
    is_finished: Callable[[str], bool] | None = None,
    part: Part = WHOLE,
) -> Prompt | Finished | None:
    """None: the record's id belongs to another `part`, and so (since an unusable line goes
    by its line number) does the line: nothing here is this part's, and normalising it (90%
    of the cost of a line) is skipped. An N-part run reads the input N times over."""
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc}", kind="invalid_json") from exc
    if not isinstance(record, dict):
        raise InputError("a record must be a JSON object", kind="bad_type")
    try:
        return _prompt_of(record, line, is_finished, part)
    except InputError as err:  # errors/ keeps the id the user gave (a batch's custom_id)
        given = record.get("custom_id") if is_batch_request(record) else record.get("id")
        err.record_id = str(given) if isinstance(given, str | int) and given != "" else None
        raise


def _prompt_of(
    record: dict[str, Any], line: int, is_finished: Callable[[str], bool] | None, part: Part
) -> Prompt | Finished | None:
    batch = is_batch_request(record)
    if batch:
        record = from_batch_request(record)
    given = record.get("id")
    plain_id = isinstance(given, str | int) and not isinstance(given, bool) and given != ""
    if plain_id and not part.owns_line(line) and not part.owns_id(str(given)):
        return None
    if is_finished is not None and plain_id and is_finished(str(given)):
        return Finished(str(given), line)
    turns = turns_of(record)
    if turns is None:
        raise InputError(
            "record has neither 'messages', 'conversations' nor 'prompt'",
            kind="no_messages",
            hint=no_turns_hint(record),
        )
    messages = with_system(record.get("system"), _prompt_turns(normalise_messages(turns)))
    tools = _tools(record.get("tools"))
    meta = record.get("meta") if isinstance(record.get("meta"), dict) else {}
    return Prompt(
        id=_record_id(record.get("id"), messages, tools),
        line=line,
        messages=messages,
        tools=tools,
        sampling=_sampling(sampling_of(record)),
        samples=record.get("samples") if batch else None,
        asked_model=record.get("model") if batch else None,
        source=record.get("source") if isinstance(record.get("source"), dict) else None,
        meta=with_category(record, meta),
        ignored=() if batch else ignored_fields(record),
    )


def _prompt_turns(messages: list[dict]) -> list[dict]:
    if messages[-1]["role"] == "assistant":
        messages = messages[:-1]
    if not any(m["role"] == "user" for m in messages):
        raise InputError("no user turn", kind="no_user_turn")
    if no_user_text(messages):  # answered, it would be a training row of an answer to nothing
        raise InputError(
            "the user turns are empty (no text, or only whitespace): there is nothing to answer",
            kind="empty_prompt",  # prepare's name for the same reject
            hint="give the line's user turn its text, or leave the line out",
        )
    if asks_nothing(messages):
        raise InputError(
            "the last user turn, the one to answer, is empty (no text, or only whitespace)",
            kind="empty_prompt",
            hint="give that turn its text, or end the conversation at the turn before it",
        )
    if messages[-1]["role"] not in ("user", "tool"):
        raise InputError(
            f"the prompt ends with a {messages[-1]['role']} turn; it must end with a user or "
            "tool turn (one trailing assistant answer is dropped)",
            kind="bad_last_turn",
        )
    return messages


def _record_id(raw: Any, messages: list[dict], tools: list[dict] | None) -> str:
    if raw is None:
        return stable_id(messages, tools)
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise InputError(
            f"'id' must be a string or integer, got {type(raw).__name__}", kind="bad_id"
        )
    text = str(raw)
    if not text:
        raise InputError("'id' is empty", kind="bad_id")
    return text


def _tools(raw: Any) -> list[dict] | None:
    if raw is None or raw == []:
        return None
    if isinstance(raw, str):  # some datasets store the tool list as a JSON string
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise InputError("'tools' is a string but not JSON", kind="bad_tools") from exc
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise InputError("'tools' must be a list of function schemas", kind="bad_tools")
    return raw


def _sampling(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InputError("'sampling' must be an object", kind="bad_sampling")
    unknown = set(raw) - SAMPLING_KEYS
    if unknown:
        raise InputError(
            f"unknown sampling key(s) {sorted(unknown)}; allowed: {sorted(SAMPLING_KEYS)}",
            kind="bad_sampling",
        )
    out = {key: _sampling_value(key, value) for key, value in raw.items()}
    return {k: v for k, v in out.items() if not (k == "thinking" and v is None)}


def _sampling_value(key: str, value: Any) -> Any:
    """Check one per-record sampling field: the wrong type here would otherwise fail every
    time this record is sent (`"seed": "7"`), on every resume."""
    if key == "extra":
        if not isinstance(value, dict):
            raise InputError(
                "sampling.extra must be an object of request fields", kind="bad_sampling"
            )
        return value
    if key == "thinking":
        if isinstance(value, bool):
            return "on" if value else "off"
        if value is None or value in ("on", "off", "auto"):
            return value
        raise InputError(
            "sampling.thinking must be on, off, auto or a boolean", kind="bad_sampling"
        )
    if value is None and key != "max_tokens":
        return None  # the server's default, as when the flag is not given
    lowest, highest, whole = SAMPLING_RANGES[key]
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or (whole and not isinstance(value, int)) or not lowest <= value < math.inf:
        kind = "an integer" if whole else "a number"
        raise InputError(
            f"sampling.{key} must be {kind} >= {lowest}, got {value!r}", kind="bad_sampling"
        )
    if highest is not None and value > highest:
        raise InputError(
            f"sampling.{key} must be at most {highest}, got {value!r}", kind="bad_sampling"
        )
    return value
