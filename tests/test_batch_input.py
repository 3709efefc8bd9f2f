"""OpenAI/vLLM batch files (`custom_id`, `url`, `body`) are read directly by generate."""

from __future__ import annotations

import orjson
from click.testing import CliRunner

from regen.cli import main
from regen.inputs import read_prompts
from regen.records import BadLine, Prompt
from regen.run.input_gate import HEAD_LINES


def batch_line(custom_id: str, content: str, **body) -> dict:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "gpt-x", "messages": [{"role": "user", "content": content}], **body},
    }


def write(path, *records) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


def test_custom_id_messages_tools_and_sampling_are_kept(tmp_path):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    write(
        tmp_path / "b.jsonl",
        batch_line(
            "req-1",
            "hi",
            temperature=0.2,
            max_completion_tokens=99,
            seed=5,
            tools=tools,
            stop=["\n\n"],
            chat_template_kwargs={"enable_thinking": False},
        ),
    )
    (prompt,) = read_prompts(tmp_path / "b.jsonl")
    assert isinstance(prompt, Prompt)
    assert prompt.id == "req-1"
    assert prompt.messages == [{"role": "user", "content": "hi"}]
    assert prompt.tools == tools
    assert prompt.sampling == {
        "temperature": 0.2,
        "seed": 5,
        "max_tokens": 99,
        "thinking": "off",
        "extra": {"stop": ["\n\n"]},
    }


def test_other_endpoints_and_a_bad_n_are_bad_lines_with_a_reason(tmp_path):
    embed = {"custom_id": "e", "url": "/v1/embeddings", "body": {"input": "x"}}
    write(tmp_path / "b.jsonl", embed, batch_line("n", "q", n=0), batch_line("m", "q", n=3))
    first, second, third = read_prompts(tmp_path / "b.jsonl")
    assert isinstance(first, BadLine) and first.kind == "unsupported_endpoint"
    assert "/v1/chat/completions" in first.message
    assert isinstance(second, BadLine) and second.kind == "bad_sampling"
    assert isinstance(third, Prompt) and third.samples == 3  # n choices: n samples


def test_generate_runs_a_batch_file_and_sends_the_body_sampling(tmp_path, fake_server):
    server = fake_server()
    write(
        tmp_path / "b.jsonl",
        batch_line("a", "one", temperature=0.1, max_tokens=7, stop=["x"]),
        batch_line("b", "two"),
    )
    result = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            str(tmp_path / "b.jsonl"),
            "-o",
            str(tmp_path / "run"),
            "--servers",
            server.url,
            "--display",
            "none",
            "--temperature",
            "0.9",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "done: 2 new completions" in result.output
    sent = {r["messages"][0]["content"]: r for r in server.requests}
    assert sent["one"]["temperature"] == 0.1 and sent["one"]["max_tokens"] == 7
    assert sent["one"]["stop"] == ["x"] and sent["one"]["model"] == "fake-model"
    assert sent["two"]["temperature"] == 0.9
    lines = [
        orjson.loads(x)
        for f in (tmp_path / "run" / "completions").glob("*.jsonl")
        for x in f.read_bytes().splitlines()
    ]
    assert sorted(r["id"] for r in lines) == ["a", "b"]


def test_a_bad_batch_line_keeps_its_custom_id_in_errors(tmp_path, fake_server):
    write(
        tmp_path / "b.jsonl",
        batch_line("good", "one"),
        {**batch_line("broken", "x"), "body": {"messages": "not a list"}},
    )
    result = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            str(tmp_path / "b.jsonl"),
            "-o",
            str(tmp_path / "run"),
            "--servers",
            fake_server().url,
            "--display",
            "none",
        ],
    )
    assert result.exit_code == 0, result.output
    (error,) = [
        orjson.loads(x)
        for f in (tmp_path / "run" / "errors").glob("*.jsonl")
        for x in f.read_bytes().splitlines()
    ]
    assert error["id"] == "broken" and error["sample"] is None and error["line"] == 2
    # one word for what errors/ holds, as the live view counts it
    assert "1 errors (1 of them unusable input lines)" in result.output


def test_the_header_says_sampling_and_model_come_from_the_batch_file(tmp_path, fake_server):
    write(tmp_path / "b.jsonl", batch_line("a", "one", max_tokens=64))  # asks for gpt-x
    result = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            str(tmp_path / "b.jsonl"),
            "-o",
            str(tmp_path / "run"),
            "--servers",
            fake_server().url,
            "--display",
            "plain",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "sampling    per request, from the batch file's bodies" in result.output
    assert "the batch file asks for gpt-x: every request goes to the model above" in result.output


def test_n_above_one_is_that_many_samples_of_the_prompt(tmp_path, fake_server):
    write(tmp_path / "b.jsonl", batch_line("three", "q3", n=3), batch_line("one", "q1"))
    args = [
        "generate",
        "--prompts",
        str(tmp_path / "b.jsonl"),
        "-o",
        str(tmp_path / "run"),
        "--servers",
        fake_server().url,
        "--display",
        "none",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "done: 4 new completions" in result.output
    lines = [
        orjson.loads(x)
        for f in (tmp_path / "run" / "completions").glob("*.jsonl")
        for x in f.read_bytes().splitlines()
    ]
    assert sorted((r["id"], r["sample"]) for r in lines) == [
        ("one", 0),
        ("three", 0),
        ("three", 1),
        ("three", 2),
    ]
    again = CliRunner().invoke(main, args)
    assert "nothing to do: all 4 items" in again.output  # a resume knows each prompt's n
    status = CliRunner().invoke(main, ["status", str(tmp_path / "run")])
    assert "finished: 4 of 4 items" in status.output


def test_another_model_past_the_files_head_is_still_reported(tmp_path, fake_server):
    """The header sees the batch file's first lines; the end of the run counts them all."""
    same = [batch_line(f"s{i}", f"q{i}", model="fake-model") for i in range(HEAD_LINES)]
    write(tmp_path / "b.jsonl", *same, batch_line("late", "q", model="gpt-late"))
    result = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            str(tmp_path / "b.jsonl"),
            "-o",
            str(tmp_path / "run"),
            "--servers",
            fake_server(slots=256).url,
            "--display",
            "none",
            "--concurrency-per-server",
            "256",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "the batch file asks for" not in result.output  # its head asks for the run's model
    assert (
        f"note: 1 of the batch file's {HEAD_LINES + 1} requests asked for another model: "
        "gpt-late (1); every request went to fake-model"
    ) in result.output
