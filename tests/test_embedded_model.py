"""End to end against a real server: the embedded llama.cpp server with SmolLM2-135M."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import psutil
import pytest

from gen_helpers import read_lines

EXAMPLES = Path(__file__).parent.parent / "examples" / "prompts.jsonl"

pytestmark = pytest.mark.model


def llama_servers() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "llama_cpp.server" in cmdline:
            found.append(proc)
    return found


def test_embedded_server_end_to_end(tmp_path):
    before = {p.pid for p in llama_servers()}
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "regen", "generate", "--prompts", str(EXAMPLES),
        "--output-dir", str(out), "--max-output-tokens", "24", "--temperature", "0",
        "--display", "plain",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"output in {out}" in done.stdout
    assert "smollm2-135m-instruct" in done.stdout  # the resolved configuration was printed

    completions = read_lines(out, "completions")
    assert len(completions) == 7
    for record in completions:
        answer = record["messages"][-1]
        assert answer["role"] == "assistant" and answer["content"].strip()
        assert record["usage"]["completion_tokens"] > 0
        assert record["finish_reason"] in ("stop", "length")
        assert record["meta"]["model"] == "smollm2-135m-instruct"
        assert record["meta"]["server"].startswith("http://127.0.0.1:")
    (bad,) = read_lines(out, "errors")
    assert bad["line"] == 8 and bad["error"]["type"] == "unknown_role"
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["config"]["embedded"] is True
    # The server was stopped by its pid at the end.
    assert {p.pid for p in llama_servers()} == before

    status = subprocess.run(
        [sys.executable, "-m", "regen", "status", str(out), "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    info = orjson.loads(status.stdout)
    assert info["alive"]["alive"] is False
    assert info["files"] == {"completions": 7, "errors": 1}
    assert info["progress"]["state"] == "finished"
