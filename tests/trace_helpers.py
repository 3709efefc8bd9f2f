"""Agent traces for the tests: a weather tool-calling trace, its tools, the short hands
that write a prompt file and read a run's completions by id, and the example tool server
(examples/tool_server.py) as its own process on loopback, stopped by pid."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import pytest

from gen_helpers import read_lines
from regen.fleet.embedded import free_port
from waiting import wait_until

EXAMPLE = Path(__file__).parent.parent / "examples" / "tool_server.py"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def weather_trace(pid: str, asked: str) -> dict:
    """user asks about `asked` -> the dataset called get_weather(Paris) as call_orig -> its
    result; the target's answer comes next."""
    call = {
        "id": "call_orig",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    return {
        "id": pid,
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": f"what is the weather in {asked}?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_orig", "content": "18C and sunny in Paris"},
        ],
    }


def write(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def by_id(output: Path) -> dict[str, dict]:
    return {r["id"]: r for r in read_lines(output, "completions")}


@pytest.fixture
def example_tool_server():
    """examples/tool_server.py as its own process on a free port, stopped by pid."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/call"
    try:
        wait_until_listening(port, process)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=10)


def wait_until_listening(port: int, process: subprocess.Popen, timeout: float = 20) -> None:
    def listening() -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
        except urllib.error.HTTPError:
            return True  # it answers (404 for GET /): listening
        except OSError:
            return False
        return True

    wait_until(listening, timeout, f"the example tool server listening on {port}", alive=process)
