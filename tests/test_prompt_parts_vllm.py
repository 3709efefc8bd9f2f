"""OpenAI content parts, on the real vLLM 0.32 CPU build: a user message of two text parts
renders as the two texts joined by a newline (vllm/renderers/chat_utils.py), so prepare,
which writes such a message as one string, joins them the same way and the prompt kept is
the one the engine would have shown the model. Checked on the token ids vLLM's /tokenize
returns for the chat (the shared fleet: no server of its own)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from real_vllm_client import json_post
from real_vllm_fleet import RealFleet
from regen.cli import main

pytestmark = pytest.mark.timeout(1500)  # the fleet's start on two loaded cores
PARTS = [{"type": "text", "text": "Name a colour."}, {"type": "text", "text": "One word."}]


def tokens(fleet: RealFleet, content: str | list[dict]) -> list[int]:
    body = {
        "model": fleet.model,
        "messages": [{"role": "user", "content": content}],
        "add_generation_prompt": True,
    }
    status, data = json_post(fleet.url + "/tokenize", body)
    assert status == 200, data
    return data["tokens"]


def test_prepare_joins_text_parts_as_vllm_renders_them(real_vllm, tmp_path: Path):
    source, out = tmp_path / "src.jsonl", tmp_path / "prompts.jsonl"
    source.write_bytes(orjson.dumps({"messages": [{"role": "user", "content": PARTS}]}) + b"\n")
    done = CliRunner().invoke(main, ["prepare", "--source", str(source), "-o", str(out)])
    assert done.exit_code == 0, done.output
    kept = orjson.loads(out.read_bytes())["messages"][0]["content"]
    assert tokens(real_vllm, kept) == tokens(real_vllm, PARTS)
    assert tokens(real_vllm, "".join(p["text"] for p in PARTS)) != tokens(real_vllm, PARTS)
