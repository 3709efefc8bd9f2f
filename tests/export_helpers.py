"""A small finished run to export (good, tool-calling, empty and cut rows), and the
short hands the `regen export` tests share."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.cli import main

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}


def records() -> list[dict]:
    good = [
        checkfix.completion(
            f"g{i}",
            f"Answer {i}: Paris is the capital of France.",
            reasoning=f"Thinking about {i}.",
            thinking="on",
        )
        for i in range(30)
    ]
    tool = checkfix.completion(
        "tool",
        "It is sunny.",
        tools=[WEATHER_TOOL],
        history=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "1", "content": "sunny"},
        ],
    )
    bad = checkfix.completion("empty", "", reasoning="", thinking="on")
    cut = checkfix.completion("cut", "Paris is", reasoning="long", finish="length")
    return [*good, tool, bad, cut]


@pytest.fixture
def run(tmp_path) -> Path:
    return checkfix.write_run(tmp_path / "run", records())


def data_file(out: Path, config: str = "default", split: str = "train") -> Path:
    """The one JSONL file of a split (a split under --max-file-mb is one file)."""
    return out / "data" / config / f"{split}-00000-of-00001.jsonl"


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]
