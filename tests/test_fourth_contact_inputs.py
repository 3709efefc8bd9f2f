"""Input shapes and messages from issue 54's fourth contact: an empty last user turn, a UTF-8
BOM, a negative temperature, content parts, Parquet file sizes, and wording that says what is
true (the `unset` line, the splits an export wrote, a difference of -0.001, how a draft
proposes, an empty source)."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from check_helpers import check, healthy
from regen.cli import main
from regen.errors import InputError
from regen.fleet.engine_defaults import server_default_note
from regen.inputs import parse_record, read_prompts
from regen.records import Prompt
from regen.score.table import _baseline, _estimate

TURNS = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
]


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def prepare(tmp_path: Path, rows: list[dict] | bytes, *extra: object):
    source = tmp_path / "src.jsonl"
    data = rows if isinstance(rows, bytes) else b"".join(orjson.dumps(r) + b"\n" for r in rows)
    source.write_bytes(data)
    out = tmp_path / "prompts.jsonl"
    result = invoke("prepare", "--source", source, "-o", out, *extra)
    rejects = tmp_path / "prompts.rejects.jsonl"
    kept = [orjson.loads(line) for line in out.read_bytes().splitlines()] if out.exists() else []
    gone = (
        [orjson.loads(line) for line in rejects.read_bytes().splitlines()]
        if rejects.exists()
        else []
    )
    return result, kept, gone


def test_generate_refuses_a_last_user_turn_that_is_empty_after_real_turns():
    record = {"id": "x", "messages": [*TURNS, {"role": "user", "content": "  "}]}
    with pytest.raises(InputError) as caught:
        parse_record(orjson.dumps(record), 1)
    assert caught.value.kind == "empty_prompt" and "the one to answer" in caught.value.message
    tool_last = {"id": "t", "messages": [*TURNS, {"role": "user", "content": "Go on."}]}
    assert isinstance(parse_record(orjson.dumps(tool_last), 2), Prompt)


def test_prepare_rejects_a_sharegpt_row_whose_last_human_turn_is_empty(tmp_path):
    turns = [("human", "Hi there"), ("gpt", "Hello!"), ("human", ""), ("gpt", "Anything else?")]
    rows = [
        {"conversations": [{"from": w, "value": v} for w, v in turns]},
        *({"conversations": [{"from": "human", "value": f"Question {i}?"}]} for i in range(3)),
    ]
    result, kept, gone = prepare(tmp_path, rows)
    assert result.exit_code == 0, result.output
    assert len(kept) == 3
    [reject] = gone
    assert reject["kind"] == "empty_prompt" and "the one to answer" in reject["reason"]
    assert "give that turn its text" in reject["fix"]


def test_check_flags_an_answer_to_an_empty_last_user_turn(tmp_path):
    history = [*TURNS, {"role": "user", "content": ""}]
    blank = checkfix.completion("blank", "Sure, what else?", history=history)
    _, report = check(tmp_path, [*healthy(), blank])
    assert "empty_prompt" in report["failed_rules"]


def test_a_utf8_bom_on_the_first_line_is_read_past(tmp_path):
    bom = b"\xef\xbb\xbf"
    rows = [{"prompt": f"Question {i}?"} for i in range(3)]
    data = bom + b"".join(orjson.dumps(r) + b"\n" for r in rows)
    result, kept, gone = prepare(tmp_path, data)
    assert result.exit_code == 0, result.output
    assert len(kept) == 3 and gone == []
    prompts = tmp_path / "bom.jsonl"
    prompts.write_bytes(bom + orjson.dumps({"id": "a", "prompt": "Hi"}) + b"\n")
    [first] = list(read_prompts(prompts))
    assert isinstance(first, Prompt) and first.id == "a"


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--temperature", "-1", "x>=0"),
        ("--temperature", "0.6,-1", "x>=0"),
        ("--top-p", "1.5", "0<=x<=1"),
    ],
)
@pytest.mark.parametrize("verb", ["generate", "plan"])
def test_a_sampling_flag_out_of_range_is_refused_with_the_range(tmp_path, verb, flag, value, says):
    out = ["--output-dir", tmp_path / "run"] if verb == "generate" else []
    result = invoke(verb, "--prompts", tmp_path / "p.jsonl", *out, flag, value)
    assert result.exit_code == 2 and says in result.output, result.output


def test_openai_text_parts_are_joined_by_a_newline_as_vllm_joins_them(tmp_path):
    parts = [{"type": "text", "text": "Name a colour."}, {"type": "text", "text": "One word."}]
    rows = [{"messages": [{"role": "user", "content": parts}]}]
    result, kept, _ = prepare(tmp_path, rows)
    assert result.exit_code == 0, result.output
    assert kept[0]["messages"][0]["content"] == "Name a colour.\nOne word."


@pytest.mark.parametrize(("mb", "files"), [("0.002", "several"), ("0", "one")])
def test_max_file_mb_cuts_parquet_too(tmp_path, monkeypatch, mb, files):
    """A Parquet shard closes at the first row group past the size (groups of 5 rows here)."""
    import regen.export.files as export_files

    monkeypatch.setattr(export_files, "ROW_GROUP", 5)
    run = checkfix.write_run(tmp_path / "run", healthy(40))
    out = tmp_path / "ds"
    tokenizer = checkfix.qwen_style_dir()
    args = ["export", run, "-o", out, "--format", "tokenized", "--tokenizer", tokenizer]
    result = invoke(*args, "--max-file-mb", mb)
    assert result.exit_code == 0, result.output
    shards = sorted((out / "data").rglob("train-*.parquet"))
    assert (len(shards) > 1) if files == "several" else (len(shards) == 1), shards
    assert "gives a train split with input_ids" in result.output  # no validation was asked


def test_the_unset_line_lists_only_what_is_unset():
    sampling = {"temperature": 1.0, "top_p": None, "top_k": None, "extra": None}
    note = server_default_note({"name": "llamacpp"}, sampling)
    assert "temperature" not in note and "top_p=1.0" in note and "repeat_penalty=1.0" in note
    assert "top_p 0.95" in note  # llama.cpp's own, for what is unset


def test_score_wording_says_what_is_true():
    base = {
        "file": "old.json",
        "draft": "ngram",
        "groups": {
            "qa": {
                "3": {
                    "rows": 4,
                    "before": 1.5,
                    "after": 1.499,
                    "difference": -0.001,
                    "ci95_half_width": None,
                }
            }
        },
    }
    table = "\n".join(_baseline(base, 3))
    assert "-0.00" not in table and "+0.00" in table
    sampled = {"estimate": "sampled", "temperature": 1.0, "draft_sampling": "probabilistic"}
    assert "proposes by" not in _estimate(sampled)
    assert "samples each proposal from its own distribution" in _estimate(sampled)


def test_an_empty_source_says_it_is_empty(tmp_path):
    result, _, _ = prepare(tmp_path, b"")
    assert result.exit_code == 3, result.output
    assert "has no rows" in result.output and "cannot tell the format" not in result.output
