"""The real-engine tier, a real engine's run once finished: a real vLLM (the CPU build in
.venv-vllm, serving the embedded SmolLM2) started once for the whole run by `regen serve
--device cpu --restart-dead` (tests/real_vllm.py). Each test keeps its work small: a few
prompts of 16-32 tokens. Here: score with the server's own prompt logprobs, and check and
export from the token ids the engine returned."""

from __future__ import annotations

import json

import pytest

from gen_helpers import write_prompts
from real_vllm_client import generate, regen

pytestmark = pytest.mark.timeout(1500)  # the first test waits for the fleets' start


def test_score_with_the_real_prompt_logprobs_of_a_self_draft(real_vllm, tmp_path):
    """The server is its own draft: every answer token is its own top-1."""
    write_prompts(tmp_path / "p.jsonl", 3)
    done = generate(real_vllm, tmp_path / "p.jsonl", tmp_path / "run", "--temperature", "0")
    assert done.returncode == 0, done.stderr
    scored = regen(
        "score",
        str(tmp_path / "run"),
        "--draft-servers",
        real_vllm.url,
        "--draft-api",
        "vllm",
        "--api-key-env",
        "VLLM_API_KEY",
        "--tokenizer",
        "embedded",
        "--k",
        "3",
        "--json",
    )
    assert scored.returncode == 0, scored.stdout + scored.stderr
    overall = json.loads(scored.stdout)["drafts"][0]["groups"]["(overall)"]
    assert overall["rows"] == 3
    assert overall["top1_match"]["value"] >= 0.95, overall["top1_match"]


def test_the_engines_own_ids_export_as_the_template_renders_them(real_vllm, tmp_path):
    """A real engine's stored ids (SmolLM2's real ChatML template): check builds every sample
    from them and finds it equal to the re-tokenised one, and an export from the ids is the
    same bytes as one that re-tokenises (the ids stripped from the run)."""
    write_prompts(tmp_path / "p.jsonl", 4)
    extra = ("--return-token-ids", "--temperature", "0")
    done = generate(real_vllm, tmp_path / "p.jsonl", tmp_path / "run", *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    checked = regen(
        "check",
        str(tmp_path / "run"),
        "--tokenizer",
        "embedded",
        "--json",
        str(tmp_path / "check.json"),
    )
    report = json.loads((tmp_path / "check.json").read_text())
    assert report["overall"]["token_ids"] == {"checked": 4, "mismatched": 0}, checked.stdout
    plain = tmp_path / "plain" / "completions"
    plain.mkdir(parents=True)
    for shard in (tmp_path / "run" / "completions").glob("*.jsonl"):
        rows = [json.loads(line) for line in shard.read_text().splitlines() if line.strip()]
        assert all(r["token_ids"]["prompt"] for r in rows)
        (plain / shard.name).write_text(
            "".join(
                json.dumps({k: v for k, v in r.items() if k != "token_ids"}) + "\n" for r in rows
            )
        )
    outs = []
    for name in ("run", "plain"):
        out = tmp_path / f"out-{name}"
        exported = regen(
            "export",
            str(tmp_path / name),
            "-o",
            str(out),
            "--format",
            "speculators",
            "--tokenizer",
            "embedded",
        )
        assert exported.returncode == 0, exported.stdout + exported.stderr
        outs.append({p.name: p.read_bytes() for p in sorted(out.rglob("*.jsonl"))})
    assert outs[0] == outs[1] and outs[0]
