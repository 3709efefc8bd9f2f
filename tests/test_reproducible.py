"""The walkthrough is reproducible: with --seed, the embedded model gives the same answers on
every run (so `regen check` gives the README's verdict), and without it sampling is the
server's own and unseeded."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gen_helpers import read_lines

ROOT = Path(__file__).parent.parent
pytestmark = pytest.mark.model


def generate(prompts: Path, out: Path, *extra: str) -> dict[str, tuple]:
    command = [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(prompts),
        "-o",
        str(out),
        "--max-output-tokens",
        "32",
        "--display",
        "plain",
        *extra,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return {
        r["id"]: (r["messages"][-1].get("content"), r["finish_reason"], r["meta"]["sampling"])
        for r in read_lines(out, "completions")
    }


def test_the_same_seed_gives_the_same_answers(tmp_path):
    prompts = tmp_path / "p.jsonl"
    lines = (ROOT / "examples" / "prompts.jsonl").read_text().splitlines()[:4]
    prompts.write_text("\n".join(lines) + "\n")
    first = generate(prompts, tmp_path / "a", "--seed", "7")
    again = generate(prompts, tmp_path / "b", "--seed", "7")
    assert len(first) == 4 and first == again
    assert all(sampling["seed"] == 7 for _, _, sampling in first.values())


def test_the_walkthrough_generate_command_is_seeded():
    readme = (ROOT / "README.md").read_text()
    short = readme[readme.index("## Ten minutes") : readme.index("## On a real fleet")]
    walkthrough = (ROOT / "docs" / "walkthrough.md").read_text() + short
    commands = re.findall(r"^\$ regen generate (?:.*\\\n)*.*$", walkthrough, re.M)
    embedded = [c for c in commands if "--servers" not in c and "--fleet" not in c]
    assert embedded, "the walkthrough has no generate command on the embedded model"
    assert all(re.search(r"--seed \d+", c) for c in embedded), embedded
