"""A small finished run to export (good, tool-calling, empty and cut rows), the README
walkthrough's run (`walkthrough`, answered by the embedded model), and the short hands the
`regen export` tests share."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.cli import main

ROOT = Path(__file__).parent.parent

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


def regen(*args, ok=(0,), env=None) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "regen", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode in ok, done.stdout + done.stderr
    return done


@pytest.fixture(scope="session")
def walkthrough(tmp_path_factory) -> Path:
    """The README walkthrough's run: the example recipe, answered by the embedded model; built
    once per session (a minute of CPU), read by the dataset-export tests of every module."""
    work = tmp_path_factory.mktemp("walkthrough")
    prompts = work / "prompts.jsonl"
    regen("prepare", ROOT / "examples" / "recipe.yaml", "--output", prompts)
    regen(
        "generate",
        "--prompts",
        prompts,
        "--output-dir",
        work / "run",
        "--max-output-tokens",
        "24",
        "--temperature",
        "0",
        "--seed",
        "7",
        "--display",
        "plain",
    )
    return work / "run"


def export(run: Path, out: Path, *extra, ok=(0,), env=None) -> subprocess.CompletedProcess:
    return regen("export", run, "-o", out, *extra, ok=ok, env=env)
