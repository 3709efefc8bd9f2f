"""Acceptance at a sampling temperature, against the real vLLM engine (its CPU build in
.venv-vllm): regen's n-gram draft is vLLM's own prompt lookup, and `score --draft ngram` over
a run drawn at temperature 0.7 by the shared fleet (which speculates with n-gram lookup,
tests/real_vllm.py) agrees with the acceptance the engine counted on the same requests.

The run asks no logprobs: an n-gram draft proposes one token, so its estimate min(1, q/p) is
the indicator "the answer's token is the draft's" and needs none (vLLM 0.32's CPU build also
answers logprobs on a speculating server in processed mode with NaN, an HTTP 400). Why the
two can agree exactly and not only on average: vLLM verifies an n-gram draft (no
draft probabilities) by accepting token d with probability p(d), and on a rejection draws the
replacement from p with d removed (v1/sample/rejection_sampler.py). So the answer's token at a
drafted position is the draft's token exactly when the engine accepted it, and replaying the
same lookup on the answer's own tokens gives the engine's steps, whatever the temperature."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import read_lines, run
from real_vllm import KEY, SPEC, VLLM_PYTHON, K, RealFleet
from regen.cli import main
from regen.fleet.engine_metrics import spec_decode_counters
from regen.fleet.server import Timeouts
from regen.run.sampling import Sampling
from regen.score.ngram import draft_starts

pytestmark = pytest.mark.timeout(1500)  # the first real-engine test may wait for the start
TIMEOUTS = Timeouts(request=600, connect=5, stall=300)
TEXTS = {
    "copy": ["Repeat the word blue forty times, separated by spaces.",
             "Repeat exactly, three times: the quick brown fox jumps over the lazy dog.",
             "Write 'ab ab ab' ten times.",
             "Repeat this sentence twice: the cat sat on the mat and looked at the hat."],
    "list": ["Count from one to twenty in words, separated by commas.",
             "List the days of the week twice, separated by commas.",
             "List the months of the year, separated by commas.",
             "Write the numbers 1 to 30 separated by spaces."],
}  # fmt: skip
SAMPLES = 3  # draws per prompt: 24 answers of up to 96 tokens


@pytest.fixture
def keyed(monkeypatch) -> str:
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    return "VLLM_API_KEY"


def write_prompts(path: Path) -> None:
    with open(path, "wb") as fh:
        for category, texts in TEXTS.items():
            for i, text in enumerate(texts):
                line = {"id": f"{category}-{i}", "messages": [{"role": "user", "content": text}],
                        "meta": {"category": category}}  # fmt: skip
                fh.write(orjson.dumps(line) + b"\n")


PROPOSE = """
import json, sys
import numpy as np
from vllm.v1.spec_decode.ngram_proposer import _find_longest_matched_ngram_and_propose_tokens
out = []
for ids, lo, hi, k in json.load(sys.stdin):
    a = np.array(ids, dtype=np.int32)
    out.append([_find_longest_matched_ngram_and_propose_tokens(a[:p], lo, hi, 1 << 20, k)
                .tolist() for p in range(1, len(ids) + 1)])
print(json.dumps(out))
"""


def test_regens_lookup_drafts_what_vllms_own_proposer_drafts():
    """vLLM's proposer function itself, in its own Python, on 200 random contexts of a small
    vocabulary (many repeats, overlapping matches, no match at all) at several settings."""
    rng = random.Random(35)
    cases = []
    for _ in range(200):
        ids = [rng.randint(0, rng.randint(1, 4)) for _ in range(rng.randint(1, 50))]
        lo = rng.randint(1, 3)
        cases.append([ids, lo, rng.randint(lo, 5), rng.randint(1, 6)])
    done = subprocess.run([str(VLLM_PYTHON), "-c", PROPOSE], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    for (ids, lo, hi, k), theirs in zip(cases, json.loads(done.stdout), strict=True):
        starts = draft_starts([*ids, -1], 0, lo, hi)  # one past the end: the whole context
        ours = [[] if starts[p] is None else ids[starts[p] : min(starts[p] + k, p)]
                for p in range(1, len(ids) + 1)]  # fmt: skip
        assert ours == theirs, (ids, lo, hi, k)


def test_ngram_acceptance_at_temperature_is_the_engines(tmp_path, real_vllm: RealFleet, keyed):
    write_prompts(tmp_path / "p.jsonl")
    before = spec_decode_counters(real_vllm.metrics())
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [], fleet=real_vllm.fleet_path,
                 model=real_vllm.model, api_key_env=keyed, timeouts=TIMEOUTS, concurrency=8,
                 samples_per_prompt=SAMPLES, return_token_ids=True,
                 sampling=Sampling(max_tokens=96, temperature=0.7, seed=35))  # fmt: skip
    assert result.exit_code == 0, result.message
    after = spec_decode_counters(real_vllm.metrics())
    delta = {name: after[name] - before.get(name, 0.0) for name in after}
    records = read_lines(tmp_path / "out", "completions")
    assert len(records) == len(TEXTS) * 4 * SAMPLES
    cli = CliRunner().invoke(main, ["score", str(tmp_path / "out"), "--draft", "ngram",
                                    "--tokenizer", "embedded", "--k", str(K), "--all",
                                    "--json"])  # fmt: skip
    assert cli.exit_code == 0, cli.output
    draft = orjson.loads(cli.output)["drafts"][0]
    # the lookup the fleet served with, read from the run: prompt_lookup_max 3, min unset -> 3
    assert draft["identity"]["draft"] == f"vllm-ngram:{SPEC['prompt_lookup_max']}-3"
    assert (draft["estimate"], draft["temperature"]) == ("sampled", 0.7)
    overall = draft["groups"]["(overall)"]["by_k"][0]
    engine = 1 + delta["num_accepted_tokens"] / delta["num_drafts"]
    print(
        f"regen tau({K}) {overall['tau']['value']}, engine {engine:.4f} over "
        f"{len(records)} answers, {delta['num_drafts']:.0f} verify steps; regen "
        f"{overall['verify_steps']} steps, runs {overall['accepted_runs']}"
    )
    assert overall["tau"]["value"] == pytest.approx(engine, rel=0.05)
    assert overall["verify_steps"] == pytest.approx(delta["num_drafts"], rel=0.05)
