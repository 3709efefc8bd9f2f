"""Short hands the hostile-input and fault tests share: the CLI, a generate run on a
fleet, and prompt lines."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from regen.cli import main


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def generate_cli(prompts: Path, out: Path, *servers: str):
    return cli(
        "generate",
        "--prompts",
        str(prompts),
        "--output-dir",
        str(out),
        "--servers",
        *servers,
        "--display",
        "none",
        "--max-retries",
        "2",
    )


def write_lines(path: Path, records: list) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


def prompt(pid: str, **fields) -> dict:
    return {"id": pid, "messages": [{"role": "user", "content": f"question {pid}"}], **fields}
