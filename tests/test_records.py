"""The typed records and their one codec: what is written is what docs/records.md describes,
in the order a resume relies on, and reads back the same."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import orjson

from regen.records import (
    Completion,
    ErrorRecord,
    RecordMeta,
    TokenIds,
    Usage,
    decode_completion,
    decode_error,
    encode_line,
)

RECORDS_PAGE = Path(__file__).parent.parent / "docs" / "records.md"


def completion(**fields) -> Completion:
    meta = RecordMeta(
        server="http://s", model="m", sampling={"max_tokens": 8}, attempts=1, latency_s=0.5, line=3
    )
    values = {
        "id": "p1",
        "sample": 0,
        "messages": [{"role": "user", "content": "hi"}],
        "finish_reason": "stop",
        "usage": Usage(4, 2),
        "meta": meta,
        **fields,
    }
    return Completion(**values)


def record_reference() -> str:
    """The records page's paragraphs on completions/ and errors/ lines."""
    text = RECORDS_PAGE.read_text()
    start = text.index("**Output** under `--output-dir`")
    return text[start : text.index("- `manifest.json`", start)]


def test_every_field_written_is_in_the_record_reference():
    documented = set(re.findall(r"`([a-z_]+)`", record_reference()))
    structs = (Completion, RecordMeta, Usage, TokenIds, ErrorRecord)
    fields = {name for struct in structs for name in struct.__struct_fields__}
    assert fields - documented == set(), "fields missing from docs/records.md"


def test_a_completion_line_starts_with_id_and_sample_and_leaves_out_empty_fields():
    line = encode_line(completion())
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert line.startswith(b'{"id":"p1","sample":0,')
    data = orjson.loads(line)
    assert "tools" not in data and "token_ids" not in data and "turns" not in data["meta"]
    assert data["usage"] == {"prompt_tokens": 4, "completion_tokens": 2}


def test_records_read_back_as_written():
    full = completion(
        tools=[{"type": "function"}], category="code", token_ids=TokenIds([1, 2], [3])
    )
    assert decode_completion(encode_line(full)) == full
    bad = ErrorRecord(id=None, sample=None, line=7, error={"type": "invalid_json"}, attempts=0)
    line = encode_line(bad)
    assert orjson.loads(line)["sample"] is None  # an unusable line says so, never omits it
    assert decode_error(line) == bad


def test_a_record_of_the_wrong_shape_is_refused_on_reading():
    line = encode_line(completion()).replace(b'"sample":0', b'"sample":"zero"')
    try:
        decode_completion(line)
    except msgspec.ValidationError as err:
        assert "sample" in str(err)
    else:
        raise AssertionError("a string sample was accepted")
