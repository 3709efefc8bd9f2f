"""Sampling the way deployments sample: `--temperature 0.6,1.0 --thinking on,off` (any
sampling option as a list) picks one setting per sample, seeded; the record says which; the
same picks on every resume; status shows the mix."""

from __future__ import annotations

import subprocess
import sys

import orjson

from gen_helpers import assert_exactly_once, write_prompts


def generate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "regen", "generate", "--display", "none", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def mixed_run(tmp_path, server, out: str, temperature: str = "0.6,1.0"):
    return generate(
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "--output-dir",
        str(tmp_path / out),
        "--servers",
        server.url,
        "--temperature",
        temperature,
        "--thinking",
        "on,off",
        "--seed",
        "3",
    )


def test_a_list_picks_a_setting_per_sample_and_the_record_says_which(tmp_path, fake_server):
    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 40)
    done = mixed_run(tmp_path, server, "out")
    assert done.returncode == 0, done.stderr
    completions, _ = assert_exactly_once(tmp_path / "out", ids)
    picks = {r["id"]: r["meta"]["sampling"] for r in completions}
    assert {p["temperature"] for p in picks.values()} == {0.6, 1.0}
    assert {p["thinking"] for p in picks.values()} == {"on", "off"}
    for body in server.requests:  # what was sent is what the record says
        pid = body["messages"][-1]["content"].removeprefix("question ")
        assert body["temperature"] == picks[pid]["temperature"]
        assert body["chat_template_kwargs"]["enable_thinking"] == (picks[pid]["thinking"] == "on")
    again = mixed_run(tmp_path, server, "again")  # another run picks the same, seeded
    assert again.returncode == 0, again.stderr
    repeat = {
        r["id"]: r["meta"]["sampling"] for r in assert_exactly_once(tmp_path / "again", ids)[0]
    }
    assert repeat == picks
    status = subprocess.run(
        [sys.executable, "-m", "regen", "status", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        "sampling mix (this session's 40 completions): temperature=0.6 thinking=" in status.stdout
    )


def test_a_resume_keeps_the_lists_and_refuses_changed_ones(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 4)
    assert mixed_run(tmp_path, server, "out").returncode == 0
    same = mixed_run(tmp_path, server, "out")
    assert same.returncode == 0 and "nothing to do" in same.stdout
    changed = mixed_run(tmp_path, server, "out", temperature="0.6,0.9")
    assert changed.returncode != 0
    assert "sampling parameters differ" in changed.stderr + changed.stdout
    manifest = orjson.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert manifest["config"]["sampling"]["temperature"] == [0.6, 1.0]


def test_a_bad_item_in_a_list_is_a_usage_error(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 1)
    done = generate(
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "--output-dir",
        str(tmp_path / "out"),
        "--servers",
        server.url,
        "--thinking",
        "on,maybe",
    )
    assert done.returncode == 2 and "maybe" in done.stderr
    assert not server.requests
