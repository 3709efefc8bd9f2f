"""Agent auxiliary calls in captured traces: skipped by several signals together, each kind
reported apart, and tunable in the recipe. A real request is never skipped for one signal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from regen.errors import ConfigError
from regen.prepare import prepare
from regen.prepare.auxiliary import AuxRules
from regen.prepare.recipe import parse_recipe

MESSAGES_URL = "https://api.anthropic.com/v1/messages"
AGENT_SYSTEM = "You are a coding agent. Use the tools to edit files."
TITLE_SYSTEM = (
    "Analyze if this message indicates a new conversation topic. If it does, extract a 2-3 "
    "word title that captures the new topic. Format your response as a JSON object."
)
LS_TOOL = {"name": "ls", "description": "List files", "input_schema": {"type": "object"}}


def trace(body: dict, url: str = MESSAGES_URL, session: str | None = None) -> dict:
    row: dict = {"request": {"method": "POST", "url": url, "body": body}}
    if session:
        row["session_id"] = session
    return row


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


TITLE = trace(
    {
        "model": "small",
        "max_tokens": 32,
        "temperature": 0,
        "system": TITLE_SYSTEM,
        "messages": [user("Please refactor the parser module to stream rows.")],
    }
)
PROBE = trace({"model": "small", "max_tokens": 1, "messages": [user("quota")]})
COUNT = trace({"model": "big", "messages": [user("Count me.")]}, url=MESSAGES_URL + "/count_tokens")
REAL = [
    trace(
        {
            "model": "big",
            "max_tokens": 4096,
            "system": AGENT_SYSTEM,
            "tools": [LS_TOOL],
            "messages": [user(f"Task {i}: list the files and explain the layout.")],
        }
    )
    for i in range(3)
]
# One signal alone is not enough: each of these is a real request.
SMALL_BUT_REAL = trace(
    {
        "model": "big",
        "max_tokens": 8,
        "messages": [
            user(
                "Classify the sentiment of this long product review as positive or negative: the "
                "battery lasts two days and the screen is bright."
            )
        ],
    }
)
TITLE_WORD_BUT_REAL = trace(
    {
        "model": "big",
        "max_tokens": 4096,
        "tools": [LS_TOOL],
        "system": "You are an editor. Suggest a title when asked.",
        "messages": [
            user("Fix the typo in README.md"),
            {"role": "assistant", "content": "Done."},
            user("Now suggest a title for the notes"),
        ],
    }
)


def run(tmp_path: Path, rows: list[dict], **recipe: object) -> dict:
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    parsed = parse_recipe(
        {"sources": [{"path": str(path), "format": "traces", "count": "all"}], **recipe}
    )
    return prepare(parsed, tmp_path / "prompts.jsonl").data["sources"][0]


def test_each_kind_is_skipped_and_reported_apart(tmp_path):
    source = run(tmp_path, [TITLE, PROBE, COUNT, *REAL, SMALL_BUT_REAL, TITLE_WORD_BUT_REAL])
    assert source["skipped"] == {"quota_probe": 1, "title_generation": 1, "token_count": 1}
    assert source["converted"] == 5  # the three agent turns and the two one-signal requests
    rejects = [json.loads(x) for x in (tmp_path / "prompts.rejects.jsonl").read_text().splitlines()]
    title = next(r for r in rejects if r["kind"] == "title_generation")
    assert "max_tokens=32" in title["reason"] and "temperature 0" in title["reason"]


def test_the_recipe_can_keep_a_kind_and_tune_thresholds(tmp_path):
    source = run(
        tmp_path,
        [TITLE, PROBE, COUNT, *REAL],
        auxiliary={"keep": ["quota_probe"], "title_max_tokens": 16},
    )
    # quota probes kept; the title call (max_tokens 32 > 16) still has temperature 0 and one
    # user message, two signals beside the instruction: still skipped
    assert source["skipped"] == {"title_generation": 1, "token_count": 1}


def test_title_needs_the_instruction_and_two_more_signals():
    rules = AuxRules()
    body = {
        "max_tokens": 4096,
        "system": TITLE_SYSTEM,
        "tools": [LS_TOOL],
        "messages": [user("a"), {"role": "assistant", "content": "b"}, user("c")],
    }
    assert rules.classify("/v1/messages", body) is None
    body["temperature"] = 0
    assert rules.classify("/v1/messages", body) is None  # one signal besides the instruction
    body["max_tokens"] = 24
    assert rules.classify("/v1/messages", body)[0] == "title_generation"


@pytest.mark.parametrize(
    "auxiliary, needle",
    [
        ({"skip": ["x"]}, "unknown key(s) skip"),
        ({"keep": ["titles"]}, "unknown kind(s)"),
        ({"title_pattern": "("}, "not a regular expression"),
    ],
)
def test_bad_auxiliary_settings_name_the_fix(auxiliary, needle):
    with pytest.raises(ConfigError) as err:
        parse_recipe({"sources": [{"path": "x.jsonl", "count": "all"}], "auxiliary": auxiliary})
    assert needle in str(err.value)
