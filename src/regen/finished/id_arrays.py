"""A completion line whose stored token ids are read straight into int64 arrays.

Exporting a run with stored ids (`generate --return-token-ids`) to Parquet needs the ids as
arrays. Parsed as JSON they become thousands of Python ints first (on a sample of ~2,600
tokens, two thirds of parsing the line) that are then copied into an array one by one. Here
the ids are cut out of the line as text, the rest is parsed as JSON, and the digits go into
arrays in one numpy call each: the same values, without an int object per token.

The fast path takes only the exact compact form regen writes (`"token_ids":{"prompt":[...]
or null,"completion":[...]}`, digits and commas) as the line's own top-level field; anything
else (spaces, another shape, a nested field of that name) returns None, and the caller
parses the line as it always did. So a line reads the same values either way.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import orjson

_KEY = b'"token_ids":'
_FIELD = _KEY + b'{"prompt":'
_COMPLETION = b',"completion":['
_NULL = b"null"
_DIGITS = b"0123456789,"
_CLAMPED = np.iinfo(np.int64).max  # numpy's reading of a number too big for int64
_ABSENT = object()


def loads_with_id_arrays(line: bytes) -> Any | None:
    """The line's JSON value, its top-level `token_ids` lists as int64 arrays; None when the
    line is not in the form this reads (then parse it with orjson)."""
    start = line.find(_KEY)
    if start < 0 or not line.startswith(_FIELD, start):
        return None
    cut = _cut_ids(line, start + len(_FIELD))
    if cut is None:
        return None
    prompt_text, completion_text, end = cut
    if line.find(_KEY, end) >= 0:  # the name twice (a tool's parameter, say): the whole parse
        return None
    try:
        value = orjson.loads(line[:start] + b'"token_ids":null' + line[end:])
    except orjson.JSONDecodeError:
        return None  # the caller's own parse says what is wrong with the line
    # the field cut out must be the line's own: a nested one leaves this absent
    if not isinstance(value, dict) or value.get("token_ids", _ABSENT) is not None:
        return None
    completion = int_array(completion_text)
    prompt = None if prompt_text is None else int_array(prompt_text)
    if completion is None or (prompt_text is not None and prompt is None):
        return None
    value["token_ids"] = {"prompt": prompt, "completion": completion}
    return value


def _cut_ids(line: bytes, at: int) -> tuple[bytes | None, bytes, int] | None:
    """The prompt's and the completion's digits (the prompt's None for `null`) and where the
    field's value ends, for the compact form only."""
    prompt = None
    if line.startswith(_NULL, at):
        at += len(_NULL)
    elif line.startswith(b"[", at):
        close = line.find(b"]", at)
        if close < 0:
            return None
        prompt, at = line[at + 1 : close], close + 1
    else:
        return None
    if not line.startswith(_COMPLETION, at):
        return None
    at += len(_COMPLETION)
    close = line.find(b"]", at)
    if close < 0 or not line.startswith(b"}", close + 1):
        return None
    return prompt, line[at:close], close + 2


def int_array(digits: bytes) -> np.ndarray | None:
    """`1,2,3` as an int64 array; None unless it is non-negative integers joined by commas
    (each of which fits in int64)."""
    if not digits:
        return np.zeros(0, dtype=np.int64)
    if digits.translate(None, _DIGITS) or digits.endswith(b","):
        return None
    try:  # numpy refuses an empty number (`1,,2`); one too big reads as the largest int64
        values = np.fromstring(digits, dtype=np.int64, sep=",")
    except ValueError:
        return None
    if values.max() == _CLAMPED:
        return None
    if not _STRICT and len(values) != digits.count(b",") + 1:
        return None  # an older numpy stops reading at an empty number, with a warning
    return values


def _refuses_an_empty_number() -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.fromstring(b"1,,2", dtype=np.int64, sep=",")
    except ValueError:
        return True
    return False


_STRICT = _refuses_an_empty_number()
