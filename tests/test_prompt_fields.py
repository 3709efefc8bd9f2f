"""Prompt files as people write them: a top-level `system` (ShareGPT's column, or beside
`messages`), a top-level `category`, fields generate does not read, and a `prompt`-only line
in a file of good ones. Each is generated as written, or said, never dropped in silence."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from gen_helpers import read_lines
from regen.cli import main

ASK = "Answer in French: what colour is the sky?"


def generate(tmp_path: Path, server, *records: dict):
    prompts = tmp_path / "p.jsonl"
    prompts.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        [
            "generate",
            "--servers",
            server.url,
            "--prompts",
            str(prompts),
            "--output-dir",
            str(out),
            "--display",
            "plain",
        ],
    )
    return result, out


def sent_messages(server) -> dict[str, list[dict]]:
    """The messages each request carried, by the text of its last user turn."""
    return {body["messages"][-1]["content"]: body["messages"] for body in server.requests}


def test_a_top_level_system_is_sent_as_the_system_prompt(tmp_path, fake_server):
    server = fake_server()
    result, out = generate(
        tmp_path,
        server,
        {
            "id": "sharegpt",
            "system": "Always answer in French.",
            "conversations": [{"from": "human", "value": ASK}, {"from": "gpt", "value": "old"}],
        },
        {
            "id": "beside",
            "system": "Reply in one word.",
            "messages": [{"role": "user", "content": "Sky colour?"}],
        },
    )
    assert result.exit_code == 0, result.output
    sent = sent_messages(server)
    assert sent[ASK][0] == {"role": "system", "content": "Always answer in French."}
    assert sent["Sky colour?"][0] == {"role": "system", "content": "Reply in one word."}
    records = {r["id"]: r for r in read_lines(out, "completions")}
    assert records["sharegpt"]["messages"][0]["content"] == "Always answer in French."


def test_system_and_a_system_message_same_text_once_different_refused(tmp_path, fake_server):
    server = fake_server()
    own = {"role": "system", "content": "Be brief."}
    _, out = generate(
        tmp_path,
        server,
        {
            "id": "same",
            "system": "Be brief.",
            "messages": [own, {"role": "user", "content": "same?"}],
        },
        {
            "id": "differ",
            "system": "Be verbose.",
            "messages": [own, {"role": "user", "content": "differ?"}],
        },
    )
    assert [m["role"] for m in sent_messages(server)["same?"]] == ["system", "user"]
    assert "differ?" not in sent_messages(server)  # never sent with one of the two
    (bad,) = read_lines(out, "errors")
    assert bad["id"] == "differ" and bad["error"]["type"] == "conflicting_system"
    assert "drop the 'system' field" in bad["error"]["message"]


def test_a_top_level_category_is_read_and_unread_fields_are_said_once(tmp_path, fake_server):
    server = fake_server()
    rows = [
        {
            "id": f"r{i}",
            "category": "maths",
            "label": "x",
            "temperature": 0.2,
            "messages": [{"role": "user", "content": f"question {i}"}],
        }
        for i in range(3)
    ]
    result, out = generate(tmp_path, server, *rows)
    assert result.exit_code == 0, result.output
    assert {r["category"] for r in read_lines(out, "completions")} == {"maths"}
    notes = [line for line in result.output.splitlines() if "are not read" in line]
    assert len(notes) == 1, result.output  # once per run, not once per line
    assert "'label'" in notes[0]
    assert "'category'" not in notes[0] and "'temperature'" not in notes[0]  # both are read
    assert {body["temperature"] for body in server.requests} == {0.2}


def ask(i: int, **more) -> dict:
    return {"id": f"r{i}", **more, "messages": [{"role": "user", "content": f"question {i}"}]}


def test_a_top_level_sampling_field_is_that_lines_sampling(tmp_path, fake_server):
    server = fake_server()
    rows = [
        ask(0, temperature=0.2, top_p=0.5),
        ask(1),
        ask(2, temperature=0.3, sampling={"temperature": 0.9}),
        ask(3, max_tokens="lots"),
    ]
    _, out = generate(tmp_path, server, *rows)
    sent = {body["messages"][-1]["content"]: body for body in server.requests}
    assert (sent["question 0"]["temperature"], sent["question 0"]["top_p"]) == (0.2, 0.5)
    assert "temperature" not in sent["question 1"]  # the run's default: the server's
    errors = {r["id"]: r["error"] for r in read_lines(out, "errors")}
    assert "top-level 'temperature' and sampling.temperature differ" in errors["r2"]["message"]
    assert "sampling.max_tokens must be an integer" in errors["r3"]["message"]


def test_a_question_only_line_in_a_mixed_file_points_to_prepare(tmp_path, fake_server):
    """A plain `prompt` is read as one user turn; a `question` (like `instruction` with its
    `input`) is prepare's to convert."""
    good = [{"messages": [{"role": "user", "content": f"q{i}"}]} for i in range(3)]
    _, out = generate(tmp_path, fake_server(), *good, {"id": "plain", "question": "Hi"})
    (bad,) = read_lines(out, "errors")
    assert bad["error"]["type"] == "no_messages"
    assert "regen prepare --source" in bad["error"]["message"]
    assert "'question'" in bad["error"]["message"]


def test_plan_and_generate_count_the_same_unusable_lines(tmp_path, fake_server):
    from regen.plan.sample import draw_sample

    good = [{"id": f"g{i}", "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(4)]
    again = {"id": "g0", "messages": [{"role": "user", "content": "another question"}]}
    result, out = generate(tmp_path, fake_server(), *good, again, {"question": "plain"})
    unusable_in_generate = len(read_lines(out, "errors"))
    assert unusable_in_generate == 2, result.output  # the repeated id and the bare question
    sample = draw_sample(tmp_path / "p.jsonl", size=2)
    assert (sample.prompts, sample.bad_lines) == (4, unusable_in_generate)
