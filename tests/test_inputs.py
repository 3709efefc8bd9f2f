"""Reading prompt files: formats, ids, trailing answers, and bad lines with reasons."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from regen.errors import ConfigError
from regen.inputs import read_prompts
from regen.records import BadLine, Prompt


def parse(tmp_path: Path, *records) -> list[Prompt | BadLine]:
    path = tmp_path / "p.jsonl"
    path.write_bytes(
        b"\n".join(r if isinstance(r, bytes) else orjson.dumps(r) for r in records) + b"\n"
    )
    return list(read_prompts(path))


def test_openai_messages_drop_trailing_answer_and_keep_tools(tmp_path):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    (p,) = parse(
        tmp_path,
        {
            "id": 7,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "old answer"},
            ],
            "tools": tools,
        },
    )
    assert isinstance(p, Prompt)
    assert p.id == "7"
    assert [m["role"] for m in p.messages] == ["system", "user"]
    assert p.tools == tools


def test_sharegpt_and_role_content_conversations(tmp_path):
    a, b = parse(
        tmp_path,
        {"conversations": [{"from": "human", "value": "q1"}, {"from": "gpt", "value": "a"}]},
        {"conversations": [{"role": "user", "content": "q2"}]},
    )
    assert a.messages == [{"role": "user", "content": "q1"}]
    assert b.messages == [{"role": "user", "content": "q2"}]


def test_missing_id_is_a_stable_content_hash(tmp_path):
    record = {"messages": [{"role": "user", "content": "same"}]}
    first = parse(tmp_path, record)[0]
    again = parse(tmp_path, {**record, "messages": [*record["messages"]]})[0]
    other = parse(tmp_path, {"messages": [{"role": "user", "content": "different"}]})[0]
    assert first.id == again.id != other.id
    assert first.id.startswith("h") and len(first.id) == 33


def test_text_blocks_are_joined(tmp_path):
    (p,) = parse(
        tmp_path,
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, "b"]}]},
    )
    assert p.messages[0]["content"] == "a\nb"  # as vLLM joins text parts (chat.join_text_parts)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b"{not json", "invalid_json"),
        (b"[1, 2]", "bad_type"),
        (orjson.dumps({"question": "x"}), "no_messages"),
        (orjson.dumps({"messages": [{"role": "system", "content": "s"}]}), "no_user_turn"),
        (orjson.dumps({"messages": [{"role": "wizard", "content": "s"}]}), "unknown_role"),
        (orjson.dumps({"messages": [{"role": "user", "content": 5}]}), "bad_content"),
        (orjson.dumps({"messages": [{"role": "user", "content": "x"}], "id": [1]}), "bad_id"),
        (orjson.dumps({"messages": [{"role": "user", "content": "x"}], "tools": 3}), "bad_tools"),
        (
            orjson.dumps({"messages": [{"role": "user", "content": "x"}], "sampling": {"t": 1}}),
            "bad_sampling",
        ),
        (
            orjson.dumps(
                {
                    "messages": [
                        {"role": "user", "content": [{"type": "image_url", "image_url": {}}]}
                    ]
                }
            ),
            "non_text_content",
        ),
    ],
)
def test_bad_lines_carry_line_number_and_reason(tmp_path, raw, kind):
    good = {"messages": [{"role": "user", "content": "fine"}]}
    results = parse(tmp_path, good, raw, good | {"id": "x"})
    assert isinstance(results[0], Prompt) and isinstance(results[2], Prompt)
    bad = results[1]
    assert isinstance(bad, BadLine)
    assert bad.line == 2
    assert bad.kind == kind
    assert bad.message


def test_unknown_role_message_names_the_label_and_the_fix(tmp_path):
    (bad,) = parse(tmp_path, {"messages": [{"role": "narrator", "content": "x"}]})
    assert "'narrator'" in bad.message and "--role-map narrator=user" in bad.message


def test_per_record_sampling_accepts_boolean_thinking(tmp_path):
    (p,) = parse(
        tmp_path,
        {"messages": [{"role": "user", "content": "x"}], "sampling": {"thinking": False}},
    )
    assert p.sampling == {"thinking": "off"}


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        list(read_prompts(tmp_path / "nope.jsonl"))
