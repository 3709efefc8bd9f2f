"""Sampling like vLLM and SGLang on every engine: a llama.cpp server is sent neutral values
for the knobs a request leaves out (llama.cpp's own defaults would apply a repeat penalty,
top-k 40 and min-p 0.05, even at temperature 0), the record says what was sent, and the
start-up header says what "server default" means on each engine. The embedded model, greedy,
then scores as itself: the draft that is the target accepts nearly everything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gen_helpers import read_lines, run, write_prompts
from regen.cli import main
from regen.embedded_model import default_model_path
from regen.run.config import Sampling
from regen.serve.fleetfile import FleetFile, FleetServer


def llamacpp_fleet(tmp_path: Path, url: str) -> Path:
    """A FLEET.json naming the engine, as `regen serve --engine llamacpp` writes it."""
    path = tmp_path / "FLEET.json"
    port = int(url.rsplit(":", 1)[1])
    server = FleetServer("server-0", url, port, None, "log", [])
    FleetFile("llamacpp", "m.gguf", "m", [server]).write(path)
    return path


def test_llamacpp_requests_carry_neutral_values_for_what_is_unset(tmp_path, fake_server):
    server = fake_server(dialect="llamacpp")
    write_prompts(tmp_path / "p.jsonl", 2)
    fleet = llamacpp_fleet(tmp_path, server.url)
    run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        [],
        fleet=fleet,
        sampling=Sampling(max_tokens=16, temperature=0.0, top_k=5),
    )
    for body in server.requests:
        assert body["repeat_penalty"] == 1.0 and body["min_p"] == 0.0
        assert body["top_p"] == 1.0 and body["typical_p"] == 1.0 and body["mirostat_mode"] == 0
        assert body["temperature"] == 0.0 and body["top_k"] == 5  # as the user set them
    for record in read_lines(tmp_path / "out", "completions"):
        neutral = record["meta"]["sampling"]["neutral"]
        assert neutral["repeat_penalty"] == 1.0 and "temperature" not in neutral
        assert record["meta"]["sampling"]["temperature"] == 0.0


@pytest.mark.parametrize("dialect", ["vllm", "sglang"])
def test_vllm_and_sglang_requests_carry_only_what_the_user_set(tmp_path, fake_server, dialect):
    server = fake_server(dialect=dialect)
    write_prompts(tmp_path / "p.jsonl", 2)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        [
            "generate",
            "--servers",
            server.url,
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "--output-dir",
            str(out),
            "--display",
            "plain",
            "--temperature",
            "0",
        ],
    )
    assert result.exit_code == 0, result.output
    for body in server.requests:
        assert not {"repeat_penalty", "min_p", "top_p", "top_k"} & set(body)
    assert "neutral" not in read_lines(out, "completions")[0]["meta"]["sampling"]
    (note,) = [line for line in result.output.splitlines() if " unset " in line]
    assert f"on {dialect}, the model's generation_config" in note


@pytest.mark.model
def test_the_embedded_model_greedy_scores_as_itself(tmp_path):
    """Scored with its own GGUF as the draft, greedy answers are the draft's own argmax: what
    is left is batched against incremental logits. llama.cpp's repeat penalty 1.1 made
    this top-1 0.78, tau(3) 2.81 on the same prompts."""
    prompts = tmp_path / "p.jsonl"
    questions = [
        "Explain what a hash table is.",
        "Write a short poem about the sea.",
        "How do I reverse a list in Python?",
        "Describe the water cycle.",
        "Give three tips for learning a language.",
        "Why is the sky blue?",
    ]
    prompts.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "messages": [{"role": "user", "content": q}]}) + "\n"
            for i, q in enumerate(questions)
        )
    )
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(prompts),
        "--output-dir",
        str(out),
        "--max-output-tokens",
        "64",
        "--temperature",
        "0",
        "--display",
        "plain",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on llamacpp, regen sends" in done.stdout and "repeat_penalty=1.0" in done.stdout
    for record in read_lines(out, "completions"):
        assert record["meta"]["sampling"]["neutral"]["repeat_penalty"] == 1.0
    score = subprocess.run(
        [
            sys.executable,
            "-m",
            "regen",
            "score",
            str(out),
            "--draft",
            str(default_model_path()),
            "--tokenizer",
            "embedded",
            "--k",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert score.returncode == 0, score.stdout + score.stderr
    (draft,) = json.loads(score.stdout)["drafts"]
    group = draft["groups"]["(overall)"]
    tau3 = next(row["tau"]["value"] for row in group["by_k"] if row["k"] == 3)
    assert group["top1_match"]["value"] >= 0.95 and tau3 >= 3.5, group
