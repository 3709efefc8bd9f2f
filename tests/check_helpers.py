"""`regen check` on a planted set for the rules' tests: 40 healthy samples plus the planted
ones, checked with a real template and tokenizer, and the rules that failed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.cli import main

QWEN = (checkfix.HERE / "qwen3_style.jinja").read_text()
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
healthy = checkfix.healthy


def check(tmp_path: Path, records: list[dict], *args: str, template: str | None = None):
    run = checkfix.write_run(tmp_path / "run", records)
    extra: list[str] = []
    if template is not None:
        (tmp_path / "t.jinja").write_text(template)
        extra = ["--chat-template", str(tmp_path / "t.jinja")]
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        main,
        [
            "check",
            str(run),
            "--tokenizer",
            str(checkfix.qwen_style_dir()),
            "--json",
            str(out),
            *extra,
            *args,
        ],
    )
    assert result.exit_code in (0, 1), result.output
    return result, json.loads(out.read_text())


def failed(report: dict) -> set[str]:
    return set(report["failed_rules"])


def call(name: str, arguments: str, cid: str = "c") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}
