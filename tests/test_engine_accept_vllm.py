"""The serving drafter's acceptance against a real vLLM that speculates with n-gram prompt
lookup: the shared fleet of the test run (tests/real_vllm.py), served by `regen serve
--speculative-config ...`, which adds `--per-request-spec-decode-metrics detailed` itself.
What generate keeps per answer, plain and streamed, `score --from-engine`'s counters, and
`score --replay-servers`' are each equal to what the server's own /metrics counted over the
same requests."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import read_lines, run
from real_vllm import K
from real_vllm_fleet import KEY, RealFleet
from regen.cli import main
from regen.fleet.engine_metrics import spec_decode_counters
from regen.fleet.server import Timeouts
from regen.run.sampling import Sampling
from regen.score.replay import PROBE_TOKENS

pytestmark = pytest.mark.timeout(1500)  # the first test may wait for the fleets' start
# Prompts whose answers repeat the prompt, so that n-gram lookup drafts and hits.
PROMPTS = {
    "copy": [
        "Repeat exactly: the cat sat on the mat, the cat sat on the mat.",
        "Repeat exactly: one two three four, one two three four, one two three four.",
    ],
    "list": [
        "List the days of the week, separated by commas.",
        "Count from one to twelve in words, separated by commas.",
    ],
}
COUNTED = (
    "num_drafts",
    "num_draft_tokens",
    "num_accepted_tokens",
    *(f"accepted_at_{i}" for i in range(K)),
)


@pytest.fixture
def keyed(monkeypatch) -> str:
    """The shared fleet's key, in the variable `--api-key-env` names."""
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    return "VLLM_API_KEY"


def counters(fleet: RealFleet) -> dict[str, float]:
    return spec_decode_counters(fleet.metrics())


def write_prompts(path: Path) -> None:
    with open(path, "wb") as fh:
        for category, texts in PROMPTS.items():
            for i, text in enumerate(texts):
                line = {
                    "id": f"{category}-{i}",
                    "messages": [{"role": "user", "content": text}],
                    "meta": {"category": category},
                }
                fh.write(orjson.dumps(line) + b"\n")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_engine_acceptance_per_answer_adds_up_to_its_metrics(tmp_path, real_vllm, keyed, stream):
    write_prompts(tmp_path / "p.jsonl")
    before = counters(real_vllm)
    timeouts = Timeouts(request=600, connect=5, stall=300, stream=stream)
    result = run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        [real_vllm.url],
        model=real_vllm.model,
        api_key_env=keyed,
        timeouts=timeouts,
        sampling=Sampling(max_tokens=48, temperature=0.0),
    )
    assert result.exit_code == 0, result.message
    delta = since(before, counters(real_vllm))
    records = read_lines(tmp_path / "out", "completions")
    assert len(records) == 4
    specs = [r["meta"]["speculative_decoding"] for r in records]
    assert all(
        s["num_spec_tokens"] == K and len(s["per_step_accepted"]) == s["num_spec_steps"]
        for s in specs
    )
    assert sum(s["num_spec_steps"] for s in specs) == delta["num_drafts"] > 0
    cli = CliRunner().invoke(
        main, ["score", str(tmp_path / "out"), "--from-engine", "--all", "--json"]
    )
    assert cli.exit_code == 0, cli.output
    draft = orjson.loads(cli.output)["drafts"][0]
    assert_counted(draft, delta)
    assert set(draft["groups"]) == {"copy", "list", "(overall)"}


def test_replay_of_a_runs_prompts_on_the_speculating_fleet(tmp_path, real_vllm, keyed):
    """A run generated without speculation's records (here: plain answers of another
    length) is replayed greedy on the fleet: its table is the fleet's own counting."""
    write_prompts(tmp_path / "p.jsonl")
    result = run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        [real_vllm.url],
        model=real_vllm.model,
        api_key_env=keyed,
        sampling=Sampling(max_tokens=40, temperature=0.8),
    )
    assert result.exit_code == 0, result.message
    before = counters(real_vllm)
    args = [
        "score",
        str(tmp_path / "out"),
        "--replay-servers",
        real_vllm.url,
        "--api-key-env",
        keyed,
        "--all",
        "--json",
    ]
    cli = CliRunner().invoke(main, args)
    assert cli.exit_code == 0, cli.output
    delta = since(before, counters(real_vllm))
    probe = read_lines(tmp_path / "out/score/replay/probe/0/run", "completions")
    assert len(probe) == 1 and probe[0]["usage"]["completion_tokens"] <= PROBE_TOKENS
    spec = probe[0]["meta"]["speculative_decoding"]  # the probe's steps are the server's too
    delta["num_drafts"] -= spec["num_spec_steps"]
    delta["num_draft_tokens"] -= spec["num_draft_tokens"]
    delta["num_accepted_tokens"] -= spec["num_accepted_draft_tokens"]
    for j, steps in enumerate(spec["acceptance_histogram"]):
        for position in range(j):
            delta[f"accepted_at_{position}"] -= steps
    draft = orjson.loads(cli.output)["drafts"][0]
    assert_counted(draft, delta)
    assert set(draft["groups"]) == {"copy", "list", "(overall)"}
    replayed = read_lines(tmp_path / "out/score/replay/run", "completions")
    assert sorted(r["id"] for r in replayed) == sorted(f"{c}-{i}" for c in PROMPTS for i in (0, 1))


def since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before.get(name, 0.0) for name in after}


def assert_counted(draft: dict, delta: dict[str, float]) -> None:
    """score's counters over the rows are the server's over the same requests."""
    overall = draft["engine_counters"]["(overall)"]
    for name in COUNTED:
        assert overall.get(name, 0) == delta[name], name
    at_k = draft["groups"]["(overall)"]["by_k"][0]
    assert at_k["tau"]["value"] == round(1 + delta["num_accepted_tokens"] / delta["num_drafts"], 4)
