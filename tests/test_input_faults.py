"""Hostile input files: a truncated or mislabelled compressed file, an empty file, a file
of the wrong shape, and one that is mostly unusable; each ends in a message that names
the file and what to do, never in a crash."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest
import zstandard

from fault_helpers import cli, generate_cli, prompt, write_lines
from gen_helpers import (
    read_lines,
    run,
)
from regen.errors import InputFileError
from regen.jsonio import iter_lines


# -- 2. compressed input ----------------------------------------------------------------------
def zst_prompts(path: Path, n: int) -> None:
    raw = b"".join(orjson.dumps(prompt(f"p{i:05d}")) + b"\n" for i in range(n))
    path.write_bytes(zstandard.ZstdCompressor(level=3).compress(raw))


def test_a_truncated_zst_is_an_error_naming_the_file_and_how_far_it_got(tmp_path, fake_server):
    server = fake_server()
    whole = tmp_path / "p.jsonl.zst"
    zst_prompts(whole, 3000)
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(InputFileError, match=r"cut\.jsonl\.zst is truncated.* after \d+ whole"):
        list(iter_lines(cut))
    result = generate_cli(cut, tmp_path / "out", server.url)
    assert result.exit_code == 3, result.output
    assert "truncated" in result.output and str(cut) in result.output
    assert "Traceback" not in result.output
    assert len(list(iter_lines(whole))) == 3000  # the whole file still reads in full


def test_prepare_refuses_a_truncated_source_naming_it(tmp_path):
    whole = tmp_path / "src.jsonl.zst"
    zst_prompts(whole, 3000)
    whole.write_bytes(whole.read_bytes()[:-100])
    result = cli("prepare", "--source", str(whole), "-o", str(tmp_path / "prompts.jsonl"))
    assert result.exit_code == 3, result.output
    assert f"{whole} is truncated" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "prompts.jsonl").exists()


def test_a_gzip_file_named_jsonl_is_recognised_and_said_so(tmp_path, fake_server):
    server = fake_server()
    raw = b"".join(orjson.dumps(prompt(f"p{i}")) + b"\n" for i in range(20))
    (tmp_path / "p.jsonl").write_bytes(gzip.compress(raw))
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    assert result.exit_code == 0 and result.stats.completed == 20
    assert any("gzip-compressed" in e for e in result.stats.events)


def test_a_compressed_inputs_line_count_is_of_its_text(tmp_path, fake_server):
    """The run's total (until the pass has counted exactly) and the manifest count the lines
    of the text, not the newline bytes a compressed file holds at random."""
    server = fake_server()
    zst_prompts(tmp_path / "p.jsonl.zst", 400)
    assert run(tmp_path / "p.jsonl.zst", tmp_path / "out", [server.url]).exit_code == 0
    manifest = orjson.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert manifest["input"]["lines"] == 400


# -- 8. an input file of the wrong shape ------------------------------------------------------
def test_an_empty_prompt_file_is_an_error(tmp_path, fake_server):
    server = fake_server()
    (tmp_path / "p.jsonl").write_bytes(b"\n\n")
    result = generate_cli(tmp_path / "p.jsonl", tmp_path / "out", server.url)
    assert result.exit_code == 3
    assert "is empty" in result.output
    # not prepare on this empty file, which would fail too: prepare on a dataset
    assert "`regen prepare --source DATA.jsonl -o prompts.jsonl`" in result.output


@pytest.mark.parametrize(
    ("content", "shape", "command"),
    [
        (
            b"".join(
                orjson.dumps({"query": f"q{i}", "response": f"r{i}"}) + b"\n" for i in range(5)
            ),
            "query/response pairs",
            "regen prepare --source",
        ),
        (
            b"sources:\n  - path: data.jsonl\n    count: all\ntotal: 100\n",
            "YAML",
            "regen prepare ",
        ),
    ],
)
def test_a_file_of_the_wrong_shape_says_what_it_is_and_how_to_convert_it(
    tmp_path, fake_server, content, shape, command
):
    server = fake_server()
    (tmp_path / "p.jsonl").write_bytes(content)
    result = generate_cli(tmp_path / "p.jsonl", tmp_path / "out", server.url)
    assert result.exit_code == 3, result.output
    assert shape in result.output and "line 1:" in result.output
    assert f"{command}" in result.output and str(tmp_path / "p.jsonl") in result.output
    assert not server.requests  # refused before anything was sent


def test_a_mostly_unusable_file_fails_loudly_after_recording_every_line(tmp_path, fake_server):
    server = fake_server()
    good = [prompt(f"p{i}") for i in range(10)]
    bad = [{"query": f"q{i}", "response": "r"} for i in range(20)]
    # The first lines look fine; the rest of the file is not prompts.
    write_lines(tmp_path / "p.jsonl", good + bad)
    from regen.run import input_gate

    original = input_gate.HEAD_LINES
    input_gate.HEAD_LINES = 10
    try:
        result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    finally:
        input_gate.HEAD_LINES = original
    assert result.exit_code == 3 and "20 of 30 line(s) are unusable" in result.message
    assert len(read_lines(tmp_path / "out", "errors")) == 20
    assert len(read_lines(tmp_path / "out", "completions")) == 10
