"""What the tests send a real vLLM fleet (real_vllm_fleet.py): a request with the fleet's API
key, and regen's command line against the fleet; and what a whole answer is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from real_vllm_fleet import KEY, RealFleet


def json_post(
    url: str, body: dict, key: str | None = KEY, timeout: float = 120
) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def regen(*args: str, key: str | None = KEY, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_API_KEY"}
    if key:
        env["VLLM_API_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "regen", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def generate(fleet: RealFleet, prompts: Path, out: Path, *extra: str, key: str | None = KEY):
    return regen(
        "generate",
        "--prompts",
        str(prompts),
        "--fleet",
        str(fleet.fleet_path),
        "--output-dir",
        str(out),
        "--max-output-tokens",
        "16",
        "--display",
        "plain",
        *extra,
        key=key,
    )


def whole(record: dict) -> bool:
    """A full answer: finished, its token ids as many as the engine counted, and not empty."""
    ids = record["token_ids"]["completion"]
    return (
        record["finish_reason"] in ("stop", "length")
        and len(ids) == record["usage"]["completion_tokens"] > 0
        and record["messages"][-1]["content"] != ""
    )
