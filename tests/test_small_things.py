"""What users of the neighbouring tools expect: --limit, --prompts -, prepare reading a file
of mixed formats (or failing when half of it is rejected), and `regen --help` in whole
sentences."""

from __future__ import annotations

import orjson
from click.testing import CliRunner

from gen_helpers import assert_exactly_once, write_prompts
from regen.cli import VERBS, main


def generate(tmp_path, server_url: str, *extra: str, stdin: bytes | None = None):
    args = [
        "generate",
        "-o",
        str(tmp_path / "run"),
        "--servers",
        server_url,
        "--display",
        "none",
        *extra,
    ]
    return CliRunner().invoke(main, args, input=stdin)


def test_limit_tries_the_first_prompts_and_the_same_command_does_the_rest(tmp_path, fake_server):
    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 10)
    first = generate(tmp_path, server.url, "--prompts", str(tmp_path / "p.jsonl"), "--limit", "3")
    assert first.exit_code == 0, first.output
    assert "done: 3 new completions" in first.output and "without --limit" in first.output
    assert sorted(r["messages"][0]["content"] for r in server.requests) == [
        f"question {i}" for i in ids[:3]
    ]
    rest = generate(tmp_path, server.url, "--prompts", str(tmp_path / "p.jsonl"))
    assert "done: 7 new completions" in rest.output
    assert_exactly_once(tmp_path / "run", ids)


def test_prompts_from_standard_input(tmp_path, fake_server):
    ids = write_prompts(tmp_path / "p.jsonl", 4)
    piped = (tmp_path / "p.jsonl").read_bytes()
    result = generate(tmp_path, fake_server().url, "--prompts", "-", stdin=piped)
    assert result.exit_code == 0, result.output
    assert_exactly_once(tmp_path / "run", ids)
    again = generate(tmp_path, fake_server().url, "--prompts", "-", stdin=piped)
    assert "nothing to do" in again.output  # the same input piped again is a resume


def write_lines(path, *records) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


def test_prepare_detects_the_format_per_row_in_a_mixed_file(tmp_path):
    write_lines(
        tmp_path / "mixed.jsonl",
        {"messages": [{"role": "user", "content": "openai one"}]},
        {"conversations": [{"from": "human", "value": "sharegpt one"}]},
        {"messages": [{"role": "user", "content": "openai two"}]},
        {"conversations": [{"from": "human", "value": "sharegpt two"}]},
    )
    out = tmp_path / "prompts.jsonl"
    result = CliRunner().invoke(
        main, ["prepare", "--source", str(tmp_path / "mixed.jsonl"), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    texts = sorted(orjson.loads(x)["messages"][0]["content"] for x in out.read_bytes().splitlines())
    assert texts == ["openai one", "openai two", "sharegpt one", "sharegpt two"]
    assert "per row: sharegpt 2" in result.output


def test_prepare_fails_when_half_a_file_is_rejected(tmp_path):
    write_lines(
        tmp_path / "half.jsonl",
        {"messages": [{"role": "user", "content": "fine"}]},
        {"messages": []},
    )
    out = tmp_path / "prompts.jsonl"
    result = CliRunner().invoke(
        main, ["prepare", "--source", str(tmp_path / "half.jsonl"), "-o", str(out)]
    )
    assert result.exit_code == 3
    assert "half or more of the records of half were rejected" in result.output
    assert out.exists()  # what could be used is written all the same


def test_regen_help_lists_whole_sentences():
    result = CliRunner().invoke(main, ["--help"], terminal_width=80)
    listed = result.output.split("Commands:")[1].strip().splitlines()
    assert len(listed) == len(VERBS)  # one line each: no summary wraps
    for line in listed:
        assert line.endswith(".") and not line.endswith("...") and len(line) <= 80, line


def test_serve_replicas_share_the_cpus_instead_of_two_threads_each(monkeypatch):
    from regen.cli.serve import threads_per_replica

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    assert threads_per_replica(1) == 8 and threads_per_replica(4) == 2
    assert threads_per_replica(16) == 1  # never 0
