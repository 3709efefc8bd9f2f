"""The sampled estimate for EAGLE-3 and DFlash (chain.py, sampled_chain.py): on an answer drawn
at temperature 0.8, each position and depth of the chain gets min(1, q_j(x)/p(x)); every
figure is drawn again here by hand, one verify point at a time (the head run as a real loop
runs it, fed the answer's tokens), with p from the target's own logits or the run's."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from regen.score.chain import Chain, chain_steps
from regen.score.drafts import CheckpointSettings, open_draft
from regen.score.outcome import Lookup, encode_accept, expected_steps
from regen.score.sampled import DrawnAt
from regen.score.tokens import TokenRow

sys.path.insert(0, str(Path(__file__).parent))

from dflash_helpers import dflash_blocks, dflash_head
from drafter_helpers import eagle3_head, hidden_by_hooks, target_dir

pytestmark = pytest.mark.model
T = 0.8
LAYERS = (2, 15, 28)
TOL = 0.5 / 89 + 1e-4  # the levels are kept in steps of 1/89


@pytest.fixture(scope="module")
def rows() -> list[list[int]]:
    """Two rows of real text (the target's own greedy continuations are not needed: the
    estimate holds for any answer tokens)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(target_dir()))
    texts = ["The cat sat on the mat and looked at the bird.", "def add(a, b):\n    return a + b"]
    return [tok(t)["input_ids"] for t in texts]


def log_softmax(logits, t: float = T):
    import torch

    return torch.log_softmax(logits.double() / t, dim=-1)


def target_logp(target, ids: list[int], start: int) -> list[float]:
    import torch

    with torch.no_grad():
        logits = target(input_ids=torch.tensor([ids])).logits[0]
    return [float(log_softmax(logits[i - 1])[ids[i]]) for i in range(start, len(ids))]


def draft_index(model, token: int) -> int:
    import torch

    if model.t2d is None:
        return token
    return int(torch.cumsum(model.t2d.long(), 0)[token]) - 1


def eagle3_logq(head, target, ids: list[int], at: int, j: int) -> float:
    """The head at the verify point after ids[:at], depth j, fed the answer's tokens."""
    import torch

    known = ids[:at]
    hidden = hidden_by_hooks(target, known, LAYERS)
    fed = torch.tensor([known[1:] + ids[at : at + j]])
    steps: list = []
    hook = head.lm_head.register_forward_hook(lambda _m, _a, o: steps.append(o))
    try:
        with torch.no_grad():
            head(
                hidden_states=torch.cat([hidden, torch.zeros(1, j, hidden.shape[-1])], dim=1),
                input_ids=fed,
                document_ids=torch.zeros_like(fed),
                ttt_steps=j + 1,
            )
    finally:
        hook.remove()
    return float(log_softmax(steps[j][0, len(known) - 2])[draft_index(head, ids[at + j])])


def dflash_logq(head, target, ids: list[int], at: int, j: int) -> float:
    known = ids[:at]
    logits = dflash_blocks(head, target, LAYERS, known, range(at - 1, at), logits=True)
    return float(log_softmax(logits[0, j + 1])[draft_index(head, ids[at + j])])


@pytest.mark.parametrize("kind", ["eagle3", "dflash"])
def test_each_depth_gets_min_one_q_over_p_at_the_run_temperature(kind, rows, tmp_path):
    target = target_dir()
    build = eagle3_head if kind == "eagle3" else dflash_head
    folder = build(target, tmp_path / kind, LAYERS, rows)
    draft = open_draft(str(folder), threads=1, checkpoint=CheckpointSettings(str(target), depth=3))
    logq_of = eagle3_logq if kind == "eagle3" else dflash_logq
    try:
        ids, start = rows[0], 4
        got: list = []
        row = TokenRow("r", 0, ids, start, {"category": "chat"}, False, DrawnAt(T), None)
        draft.run([row], lambda _r, outcome: got.append(outcome))
        (chain,) = got
        assert isinstance(chain, Chain) and chain.depth == 3
        levels, logp = chain.probabilities(), target_logp(draft.target, ids, start)
        for p in (0, 3, len(ids) - start - 3):
            for j in range(3):
                logq = logq_of(draft.model, draft.target, ids, start + p, j)
                want = min(1.0, math.exp(logq - logp[p + j]))
                assert levels[p][j] == pytest.approx(want, abs=TOL), (p, j)
        assert levels[-1][1:] == [0.0, 0.0]  # past the answer's end: rejected
        # the run's own logprobs of the draw are used where they fit: twice p halves q/p
        doubled = [lp + math.log(2) for lp in logp]
        engine = TokenRow("r", 0, ids, start, {"category": "chat"}, False, DrawnAt(T), doubled)
        draft.run([engine], lambda _r, outcome: got.append(outcome))
        halved = got[-1].probabilities()
        for p, j in ((0, 0), (2, 1)):
            logq = logq_of(draft.model, draft.target, ids, start + p, j)
            assert halved[p][j] == pytest.approx(min(1.0, math.exp(logq - doubled[p + j])), abs=TOL)
    finally:
        draft.close()
    argmax = open_draft(
        str(folder), threads=1, checkpoint=CheckpointSettings(str(target), 3, draws="argmax")
    )
    try:
        argmax.run([row], lambda _r, outcome: got.append(outcome))
        assert isinstance(got[-1], Lookup)  # the greedy chain's outcome, as before
        assert argmax.identity != draft.identity  # their rows never mix
    finally:
        argmax.close()


def test_chain_steps_replay_a_lookup_and_a_draft_model_exactly():
    """With 0/1 figures a chain is a Lookup; with one figure per position repeated at every
    depth it is outcome.expected_steps (a draft model's)."""
    import random

    rng = random.Random(3)
    for _ in range(50):
        n, depth = rng.randrange(2, 40), rng.randrange(1, 6)
        right = [rng.randrange(depth + 1) for _ in range(n)]
        ones = [[1.0 if j < r else 0.0 for j in range(depth)] for r in right]
        lookup = Lookup("".join(str(depth) for _ in range(n)), "".join(map(str, right)))
        for k in range(1, depth + 1):
            assert chain_steps(ones, k) == lookup.steps(k)
        flat = [rng.random() for _ in range(n)]
        accept = encode_accept(flat).probabilities()
        per_depth = [[accept[i + j] if i + j < n else 0.0 for j in range(depth)] for i in range(n)]
        for k in range(1, depth + 1):
            want, got = expected_steps(accept, k), chain_steps(per_depth, k)
            assert got.tokens == pytest.approx(want.tokens) and got.steps == pytest.approx(
                want.steps
            )
            assert got.answer == want.answer == n  # tokens per target forward counts them
