"""The README as it runs: its walkthrough, replayed in a fresh directory from the files that
`regen demo` writes (what a `pip install regen` user has), prints what the README shows, in
that order. Steps that need no server are replayed here; `...` in the README marks lines
left out, or the cut end of a long line."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from regen.cli import main

README = Path(__file__).parents[1] / "README.md"
CONSOLE = re.compile(r"```console\n(.*?)```", re.S)


def shown(command: str) -> list[str]:
    """The output lines the README shows under `$ <command>`."""
    for block in CONSOLE.findall(README.read_text()):
        lines = block.splitlines()
        if lines and lines[0] == f"$ {command}":
            return [line for line in lines[1:] if line.strip() and line.strip() != "..."]
    raise AssertionError(f"the README shows no `$ {command}`")


def assert_prints_in_order(expected: list[str], printed: str) -> None:
    at = 0
    lines = printed.splitlines()
    for want in expected:
        head = want.split("...")[0].rstrip() if "..." in want else want
        found = next((i for i in range(at, len(lines)) if lines[i].startswith(head)), None)
        assert found is not None, f"not printed (after line {at}): {want!r}\n{printed}"
        assert "..." in want or lines[found] == want, (lines[found], want)
        at = found + 1


@pytest.mark.parametrize(
    "command",
    ["regen demo", "regen prepare examples/recipe.yaml --output work/prompts.jsonl"],
)
def test_the_walkthrough_prints_what_the_readme_shows(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    if command != "regen demo":
        assert CliRunner().invoke(main, ["demo"]).exit_code == 0
    result = CliRunner().invoke(main, shlex.split(command)[1:])
    assert result.exit_code == 0, result.output
    assert_prints_in_order(shown(command), result.output)


def test_the_readme_names_no_path_of_anyones_machine():
    text = README.read_text()
    assert not re.search(r"/tmp/\w+/work|/work/wt|/home/(?!you/)\w+", text)
