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
from real_vllm import SPEC, K
from real_vllm_fleet import KEY, VLLM_PYTHON, RealFleet
from regen.cli import main
from regen.fleet.engine_metrics import spec_decode_counters
from regen.fleet.server import Timeouts
from regen.run.sampling import Sampling
from regen.score.ngram import draft_starts

pytestmark = pytest.mark.timeout(1500)  # the first real-engine test may wait for the start
TIMEOUTS = Timeouts(request=600, connect=5, stall=300)
TEXTS = {
    "copy": [
        "Repeat the word blue forty times, separated by spaces.",
        "Repeat exactly, three times: the quick brown fox jumps over the lazy dog.",
        "Write 'ab ab ab' ten times.",
        "Repeat this sentence twice: the cat sat on the mat and looked at the hat.",
    ],
    "list": [
        "Count from one to twenty in words, separated by commas.",
        "List the days of the week twice, separated by commas.",
        "List the months of the year, separated by commas.",
        "Write the numbers 1 to 30 separated by spaces.",
    ],
}
SAMPLES = 3  # draws per prompt: 24 answers of up to 96 tokens


@pytest.fixture
def keyed(monkeypatch) -> str:
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    return "VLLM_API_KEY"


def write_prompts(path: Path) -> None:
    with open(path, "wb") as fh:
        for category, texts in TEXTS.items():
            for i, text in enumerate(texts):
                line = {
                    "id": f"{category}-{i}",
                    "messages": [{"role": "user", "content": text}],
                    "meta": {"category": category},
                }
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
    done = subprocess.run(
        [str(VLLM_PYTHON), "-c", PROPOSE],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for (ids, lo, hi, k), theirs in zip(cases, json.loads(done.stdout), strict=True):
        starts = draft_starts([*ids, -1], 0, lo, hi)  # one past the end: the whole context
        ours = [
            [] if starts[p] is None else ids[starts[p] : min(starts[p] + k, p)]
            for p in range(1, len(ids) + 1)
        ]
        assert ours == theirs, (ids, lo, hi, k)


def generate_at(tmp_path: Path, fleet: RealFleet, keyed: str, temperature: float) -> Path:
    out = tmp_path / f"t{temperature}"
    result = run(
        tmp_path / "p.jsonl",
        out,
        [],
        fleet=fleet.fleet_path,
        model=fleet.model,
        api_key_env=keyed,
        timeouts=TIMEOUTS,
        concurrency=8,
        samples_per_prompt=SAMPLES,
        return_token_ids=True,
        sampling=Sampling(max_tokens=96, temperature=temperature, seed=35),
    )
    assert result.exit_code == 0, result.message
    return out


def score_ngram(out: Path) -> dict:
    cli = CliRunner().invoke(
        main,
        [
            "score",
            str(out),
            "--draft",
            "ngram",
            "--tokenizer",
            "embedded",
            "--k",
            str(K),
            "--all",
            "--json",
        ],
    )
    assert cli.exit_code == 0, cli.output
    draft = orjson.loads(cli.output)["drafts"][0]
    # the lookup the fleet served with, read from the run: prompt_lookup_max 3, min unset -> 3
    assert draft["identity"]["draft"] == f"vllm-ngram:{SPEC['prompt_lookup_max']}-3"
    return draft


def engine_steps_replayed(out: Path) -> tuple[int, int, int]:
    """Walk each answer with the engine's own per-step accepted counts, drafting with regen's
    lookup where the engine drafted: (steps whose drafted length is regen's, steps, rejections
    whose emitted token is the rejected draft token anyway)."""
    same = steps = emitted = 0
    for record in read_lines(out, "completions"):
        spec = record["meta"].get("speculative_decoding") or {}
        prompt, answer = record["token_ids"]["prompt"], record["token_ids"]["completion"]
        ids, start = [*prompt, *answer], len(prompt)
        starts = draft_starts(ids, start, 3, 3)
        pos, per_step = (
            start + 1,
            zip(
                spec.get("per_step_drafted") or [], spec.get("per_step_accepted") or [], strict=True
            ),
        )
        for drafted, accepted in per_step:
            while pos < len(ids) and starts[pos - start] is None:
                pos += 1  # no match: a plain decode, no step (as the engine counts)
            if pos >= len(ids):
                break
            draft = ids[starts[pos - start] : min(starts[pos - start] + K, pos)]
            steps, same = steps + 1, same + (len(draft) == drafted)
            if accepted < drafted and pos + accepted < len(ids):
                emitted += ids[pos + accepted] == draft[accepted]
            pos += accepted + 1
    return same, steps, emitted


def test_ngram_replay_is_the_engines_drafter_and_its_acceptance(tmp_path, real_vllm, keyed):
    """Greedy: regen's tau(3) is the engine's counters' (same steps; the engine also counts
    drafts accepted past the answer's end). At temperature 0.7 regen drafts exactly what the
    engine drafted at every one of its steps; the CPU build's own acceptance there is not
    asserted: it reports as rejected draft tokens that its answers then hold (see the docs)."""
    write_prompts(tmp_path / "p.jsonl")
    figures = {}
    for temperature in (0.0, 0.7):
        before = spec_decode_counters(real_vllm.metrics())
        out = generate_at(tmp_path, real_vllm, keyed, temperature)
        after = spec_decode_counters(real_vllm.metrics())
        delta = {name: after[name] - before.get(name, 0.0) for name in after}
        draft = score_ngram(out)
        assert (draft["estimate"], draft["temperature"]) == (
            ("greedy", 0.0) if temperature == 0 else ("sampled", 0.7)
        )
        overall = draft["groups"]["(overall)"]["by_k"][0]
        engine = 1 + delta["num_accepted_tokens"] / delta["num_drafts"]
        same, steps, emitted = engine_steps_replayed(out)
        figures[temperature] = (
            overall["tau"]["value"],
            round(engine, 4),
            overall["verify_steps"],
            delta["num_drafts"],
            same,
            steps,
            emitted,
        )
        assert same == steps == delta["num_drafts"] > 0, figures
    print(
        "temperature: (regen tau(3), engine tau(3), regen steps, engine steps, steps drafted "
        f"alike, steps, rejected draft tokens emitted) {figures}"
    )
    tau, engine, regen_steps, engine_steps, *_ = figures[0.0]
    assert regen_steps == engine_steps and tau == pytest.approx(engine, rel=0.05)
