"""Stored token ids read straight into arrays (finished/id_arrays.py): the values are those JSON
gives, the lines it does not take are parsed whole, and an export to Parquet reads a run's
lines that way and writes the same bytes as from the lines parsed whole."""

from __future__ import annotations

import json
import sys
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.check import Encoder
from regen.check.card import CardCheck
from regen.executors.pool import LocalWorkers
from regen.export import ExportRequest, Filters, export_run, make_format
from regen.finished import id_arrays
from regen.finished.id_arrays import int_array, loads_with_id_arrays
from regen.finished.read import parse_line
from regen.parallel import InProcess
from regen.records import Completion, RecordMeta, TokenIds, Usage, encode_line
from test_stored_ids import records


def as_lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: as_lists(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        assert value.dtype == np.int64
        return value.tolist()
    return value


def generated(prompt: list[int] | None, answer: list[int], **extra: Any) -> bytes:
    """A completions/ line as `regen generate` writes it (ids from a stream: an array)."""
    record = Completion(
        id="p1",
        sample=0,
        finish_reason="stop",
        usage=Usage(len(prompt or []), len(answer)),
        messages=[
            {"role": "user", "content": 'Say "token_ids": [1, 2]'},
            {"role": "assistant", "content": "ok", **extra},
        ],
        token_ids=TokenIds(prompt, array("i", answer)),
        meta=RecordMeta(server="s", model="m", sampling={}, attempts=1, latency_s=0.1, line=1),
    )
    return encode_line(record)


@pytest.mark.parametrize(
    "prompt,answer",
    [([1, 2, 3], [40, 50, 2]), (None, [7]), ([0], []), ([1] * 3000, list(range(2600)))],
)
def test_generates_lines_read_as_arrays_give_the_values_json_gives(prompt, answer):
    line = generated(prompt, answer)
    fast = loads_with_id_arrays(line)
    assert fast is not None  # the form generate writes is the one read fast
    assert isinstance(fast["token_ids"]["completion"], np.ndarray)
    assert as_lists(fast) == orjson.loads(line)
    assert as_lists(parse_line(line, id_arrays=True).raw) == parse_line(line).raw


TOOL = {
    "type": "function",
    "function": {
        "name": "f",
        "parameters": {"type": "object", "properties": {"token_ids": {"type": "array"}}},
    },
}
IDS = '"token_ids":{"prompt":[1],"completion":[2]}'
DECLINED = {
    "spaces": json.dumps({"id": "a", "token_ids": {"prompt": [1], "completion": [2]}}),
    "another field inside": '{"id":"a","token_ids":{"prompt":[1],"completion":[2],"n":1}}',
    "negative": '{"id":"a","token_ids":{"prompt":[1],"completion":[-2]}}',
    "a float": '{"id":"a","token_ids":{"prompt":[1],"completion":[2.5]}}',
    "too big for int64": '{"token_ids":{"prompt":[1],"completion":[99999999999999999999]}}',
    "nested, not the line's own": '{"id":"a","meta":{' + IDS + "}}",
    "a key that ends in the name": '{"id":"a","x\\"' + IDS[1:] + "}",
    "the name twice": '{"tools":[' + json.dumps(TOOL) + "]," + IDS + "}",
    "not json": '{"id":"a",' + IDS + ",}",
}


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_a_line_in_another_form_is_parsed_whole_to_the_same_values(name):
    line = DECLINED[name].encode()
    assert loads_with_id_arrays(line) is None
    whole, fast = parse_line(line), parse_line(line, id_arrays=True)
    assert type(whole) is type(fast)
    assert getattr(fast, "raw", fast) == getattr(whole, "raw", whole)


@pytest.mark.parametrize("strict", [True, False])
def test_digits_become_an_int64_array_and_anything_else_is_refused(monkeypatch, strict):
    """`strict`: numpy refuses `1,,2` (2.x); else it stops reading there and the count says so."""
    monkeypatch.setattr(id_arrays, "_STRICT", strict)
    assert int_array(b"5,0,151645").tolist() == [5, 0, 151645]
    assert int_array(b"").tolist() == []
    for bad in (b"1,,2", b",1", b"1,", b"1, 2", b"1;2", b"9223372036854775807", b"-1"):
        assert int_array(bad) is None, bad


def test_an_export_reads_generates_lines_fast_and_writes_the_same_bytes(tmp_path):
    """The qwen records with stored ids, written compact (as generate writes them: read as
    arrays, here and in two worker processes) and with spaces (parsed whole): the same
    Parquet files and summary."""
    recs = records("qwen")
    encoder = Encoder.of(checkfix.load("qwen"))
    compact = tmp_path / "compact" / "completions"
    compact.mkdir(parents=True)
    (compact / "00000.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    assert all(loads_with_id_arrays(orjson.dumps(r)) is not None for r in recs)
    spaced = checkfix.write_run(tmp_path / "spaced", recs)
    passes = {
        "compact": (compact.parent, InProcess()),
        "spaced": (spaced, InProcess()),
        "compact, two workers": (compact.parent, LocalWorkers(2, small=1)),
    }
    summaries, files = {}, {}
    for name, (run, workers) in passes.items():
        out = tmp_path / f"out-{name}"
        request = ExportRequest(
            [run],
            out,
            make_format("tokenized"),
            encoder=encoder,
            filters=Filters(),
            file_type="parquet",
            judge=CardCheck({}),
            count_tokens=True,
        )
        summary = export_run(request, workers=workers)
        facts = {k: v for k, v in summary.to_json().items() if k not in ("out_dir", "files")}
        summaries[name] = json.dumps(facts).replace(str(run), "RUN")
        files[name] = {p.relative_to(out): p.read_bytes() for p in out.rglob("*.parquet")}
    assert len(files["compact"]) >= 1
    assert files["compact"] == files["spaced"] == files["compact, two workers"]
    assert summaries["compact"] == summaries["spaced"] == summaries["compact, two workers"]
    assert json.loads(summaries["compact"])["check"]["overall"]["token_ids"]["checked"] == len(recs)
