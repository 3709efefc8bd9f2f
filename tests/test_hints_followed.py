"""A hint that names a command is followed here, on the input that produced it, and the
command must succeed: a user who does what an error says gets somewhere that works."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from regen.cli import main
from waiting import wait_until

COMMAND = re.compile(r"`(regen [^`]+)`")


def invoke(argv: list[str]):
    return CliRunner().invoke(main, argv)


def generate(prompts: str, out: str, url: str):
    return invoke(
        ["generate", "--prompts", prompts, "-o", out, "--servers", url, "--display", "none"]
    )


def follow(output: str) -> None:
    """Run the command the hint names, as a user would paste it, and expect success."""
    [command] = COMMAND.findall(output.split("hint:", 1)[1])
    result = invoke(shlex.split(command)[1:])
    assert result.exit_code == 0, f"{command}:\n{result.output}"


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))


def user_turns(out: Path) -> list[str]:
    records = [
        json.loads(line)
        for f in sorted(out.glob("completions/*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    return sorted(next(m["content"] for m in r["messages"] if m["role"] == "user") for r in records)


SHAPES = {  # single-prompt files generate does not read, which prepare converts as they are
    "question": [{"question": "What is 2+2?"}, {"question": "Name a prime."}],
    "instruction/input": [
        {"instruction": "Translate.", "input": "bonjour"},
        {"instruction": "Sum it.", "input": "1 2"},
    ],
    "query": [{"query": "capital of France"}, {"query": "tallest peak"}],
    "question/answer": [
        {"question": "Why?", "answer": "Because."},
        {"question": "How?", "answer": "So."},
    ],
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_single_prompt_file_gets_a_prepare_command_that_converts_it(
    tmp_path, fake_server, monkeypatch, shape
):
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "raw.jsonl", SHAPES[shape])
    url = fake_server().url
    refused = generate("raw.jsonl", "run", url)
    assert refused.exit_code != 0 and "regen prepare --source raw.jsonl" in refused.output
    follow(refused.output)
    assert generate("prompts.jsonl", "run", url).exit_code == 0
    assert len(user_turns(tmp_path / "run")) == 2


def test_a_recipe_passed_as_prompts_gets_the_command_that_runs_it(
    tmp_path, fake_server, monkeypatch
):
    """The demo's recipe opens with a comment: it is still known for YAML."""
    monkeypatch.chdir(tmp_path)
    assert invoke(["demo"]).exit_code == 0
    assert Path("examples/recipe.yaml").read_text().startswith("#")
    refused = generate("examples/recipe.yaml", "run", fake_server().url)
    assert "it looks like YAML" in refused.output
    assert "`regen prepare examples/recipe.yaml -o prompts.jsonl`" in refused.output
    follow(refused.output)
    assert Path("prompts.jsonl").stat().st_size > 0


def test_a_directory_gets_a_prepare_command_that_joins_its_files(
    tmp_path, fake_server, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "parts").mkdir()
    for i in range(2):
        messages = [{"role": "user", "content": f"part {i}"}]
        write_jsonl(tmp_path / "parts" / f"{i}.jsonl", [{"messages": messages}])
    refused = generate("parts", "run", fake_server().url)
    assert refused.exit_code != 0
    follow(refused.output)
    assert len(Path("prompts.jsonl").read_text().splitlines()) == 2


def test_a_parquet_file_gets_a_prepare_command_that_reads_it(tmp_path, fake_server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.table({"prompt": ["a parquet prompt", "another"]}), "data.parquet")
    refused = generate("data.parquet", "run", fake_server().url)
    assert "is a Parquet file" in refused.output
    follow(refused.output)
    assert len(Path("prompts.jsonl").read_text().splitlines()) == 2


def test_an_unknown_shape_is_not_sent_to_prepare(tmp_path, fake_server, monkeypatch):
    """prepare cannot tell this shape either: the hint says what a line needs instead."""
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "odd.jsonl", [{"text": "a"}, {"text": "b"}])
    refused = generate("odd.jsonl", "run", fake_server().url)
    assert refused.exit_code != 0 and "regen prepare" not in refused.output
    assert "'messages'" in refused.output and "'prompt'" in refused.output


def test_generate_reads_a_plain_prompt_as_one_user_turn(tmp_path, fake_server):
    """`{"prompt": "..."}` is what a user expects to work as it is (the completions API's
    shape); a list under `prompt` is the turns (TRL's prompt-only conversational shape)."""
    rows = [
        {"prompt": "plain text prompt", "completion": "an old answer"},
        {"prompt": [{"role": "user", "content": "turns under prompt"}]},
        {"id": "sys", "prompt": "with a system prompt", "system": "Be brief."},
    ]
    write_jsonl(tmp_path / "p.jsonl", rows)
    done = generate(str(tmp_path / "p.jsonl"), str(tmp_path / "run"), fake_server().url)
    assert done.exit_code == 0, done.output
    assert "done: 3 new completions, 0 errors" in done.output
    assert "'prompt'" not in done.output  # read, so not named among the unread fields
    turns = user_turns(tmp_path / "run")
    assert turns == ["plain text prompt", "turns under prompt", "with a system prompt"]


def test_prepare_detects_the_single_prompt_shapes_without_format(tmp_path):
    for shape, rows in SHAPES.items():
        write_jsonl(tmp_path / "raw.jsonl", rows)
        out = tmp_path / "out.jsonl"
        result = invoke(["prepare", "--source", str(tmp_path / "raw.jsonl"), "-o", str(out)])
        assert result.exit_code == 0, f"{shape}: {result.output}"
        assert "format pairs (auto:" in result.output
        assert len(out.read_text().splitlines()) == 2


def test_an_unknown_role_gets_a_role_map_that_prepare_takes(tmp_path, fake_server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"messages": [{"role": "narrator", "content": f"tell me {i}"}]} for i in range(2)]
    write_jsonl(tmp_path / "raw.jsonl", rows)
    url = fake_server().url
    refused = generate("raw.jsonl", "run", url)
    assert refused.exit_code != 0
    [option] = set(re.findall(r"`(--role-map [^`]+)`", refused.output))
    converted = invoke(
        ["prepare", "--source", "raw.jsonl", *shlex.split(option), "-o", "prompts.jsonl"]
    )
    assert converted.exit_code == 0, converted.output
    assert generate("prompts.jsonl", "run2", url).exit_code == 0
    assert user_turns(tmp_path / "run2") == ["tell me 0", "tell me 1"]


def test_a_stopped_run_names_the_status_command_that_shows_it(tmp_path, fake_server):
    write_jsonl(
        tmp_path / "p.jsonl",
        [{"messages": [{"role": "user", "content": f"q{i}"}]} for i in range(40)],
    )
    server = fake_server(seconds_per_token=0.02)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "regen",
            "generate",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "-o",
            str(out),
            "--servers",
            server.url,
            "--display",
            "none",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_until(lambda: server.requests, 60, "a request at the server", interval=0.05, alive=proc)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert "stopped (" in output, output
    follow("hint: " + output)
    assert "NOT RUNNING (stopped)" in invoke(["status", str(out)]).output


def test_a_run_in_use_names_the_status_command_that_watches_it(tmp_path, fake_server):
    from regen.storage.lock import RunLock

    write_jsonl(tmp_path / "p.jsonl", [{"messages": [{"role": "user", "content": "q"}]}])
    url, out = fake_server().url, tmp_path / "run"
    assert generate(str(tmp_path / "p.jsonl"), str(out), url).exit_code == 0
    with RunLock(out / "run.lock"):
        refused = generate(str(tmp_path / "p.jsonl"), str(out), url)
        assert refused.exit_code != 0 and "in use by another regen generate" in refused.output
        follow(refused.output)
