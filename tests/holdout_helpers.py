"""A finished run of three categories, each prompt answered twice, for the held-out split's
tests, and the short hands that export it and read a split's ids."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.cli import main

SIZES = {"code": 10, "chat": 20, "math": 7}  # F=0.2: 2, 4 and 1.4 -> 7 of 37 in all


def records(samples: int = 2) -> list[dict]:
    """Prompts of three categories, each answered `samples` times."""
    out = []
    for category, n in SIZES.items():
        for i in range(n):
            for s in range(samples):
                rec = checkfix.completion(
                    f"{category}-{i}", f"Paris, {category} answer {i}.{s}", category=category
                )
                out.append({**rec, "sample": s})
    return out


def cli(*args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def split_ids(out: Path, split: str) -> set[tuple[str, int]]:
    rows = []
    for path in (out / "data").glob(f"*/{split}-*.jsonl"):
        rows += [json.loads(line) for line in path.read_text().splitlines()]
    return {(r["id"], r["sample"]) for r in rows}
