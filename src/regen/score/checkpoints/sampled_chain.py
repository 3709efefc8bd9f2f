"""The sampled estimate for EAGLE-3 and DFlash (chain.py): on answers drawn at a temperature,
the drafter's q at each depth at the run's temperature, top-k and top-p (sampled.py, in the
order of the engine that drew them), against the target's p of each answer token: the run's
own logprobs where they are those of the draw, else the target's pass here (its final state
through its head: the same pass that gives the hidden states, no second one).

`--head-draws argmax` keeps the greedy chain's outcome instead (a deterministic draft's, as
vLLM drafts an EAGLE head at any temperature).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from regen.errors import InputError
from regen.score.chain import Chain, encode_chain
from regen.score.sampled import ROWS_AT_ONCE, DrawnAt, drawn_logprobs
from regen.score.tokens import TokenRow

DRAWS = ("sampled", "argmax")
SKIPPED = "target_probs_not_drawn"  # as target_probs.py: the draw cannot be redone


def sampled_row(row: TokenRow, draws: str) -> bool:
    """Whether the row gets the sampled estimate: drawn at a temperature above 0 that is
    known (or with the engine's logprobs of the draw). A row whose temperature was not
    recorded and that has no such logprobs is scored by the greedy chain, as a draft model's
    is without logprobs (hf_draft.py)."""
    if draws != "sampled" or row.drawn.greedy:
        return False
    return row.drawn.temperature is not None or _run_logprobs_fit(row)


def why_not(row: TokenRow) -> InputError | None:
    """Why the run's sampling cannot be redone on this row: the pass here applies the
    temperature, top-k and top-p, and another setting changed the draw (the engine's
    logprobs of the draw do where the run has them)."""
    if _run_logprobs_fit(row) or row.drawn.others is None:
        return None
    why = f"{row.drawn.others}; the sampled estimate applies temperature, top-k and top-p only"
    return InputError(f"{row.label}: {why}", kind=SKIPPED)


def _run_logprobs_fit(row: TokenRow) -> bool:
    return row.logprobs is not None and row.drawn.logprobs_fit() is None


def target_logp(target: Any, row: TokenRow, final: Any) -> np.ndarray:
    """log p of each answer token under the run's sampling: the run's own where they fit,
    else from the target's final states over the row (`final`: [n, hidden], normed)."""
    if _run_logprobs_fit(row):
        return np.asarray(row.logprobs, dtype=np.float64)
    import torch

    head = target.get_output_embeddings()
    out = []
    for at in range(row.start - 1, len(row.ids) - 1, ROWS_AT_ONCE):
        stop = min(at + ROWS_AT_ONCE, len(row.ids) - 1)
        with torch.no_grad():
            logits = head(final[at:stop].to(head.weight.device)).float().cpu().numpy()
        out.append(drawn_logprobs(logits, row.ids[at + 1 : stop + 1], row.drawn))
    return np.concatenate(out)


def draft_ids(model: Any, tokens: Sequence[int]) -> Any:
    """The tokens in the drafter's vocabulary (t2d marks the target ids it keeps, in order);
    -1 for a token outside it, which the drafter can never propose."""
    import torch

    ids = torch.tensor(list(tokens), dtype=torch.long)
    if getattr(model, "t2d", None) is None:
        return ids
    kept = model.t2d.cpu().bool()
    index = torch.cumsum(kept.long(), 0) - 1
    return torch.where(kept[ids], index[ids], torch.full_like(ids, -1))


def depth_logq(logits: Any, tokens: Any, drawn: DrawnAt) -> np.ndarray:
    """log q of each token (-1: outside the draft vocabulary, -inf) under the run's sampling,
    `logits` [m, draft vocabulary]."""
    inside = (tokens >= 0).numpy()
    out = np.full(len(tokens), -np.inf)
    if inside.any():
        rows = logits[torch_index(inside)].float().cpu().numpy()
        out[inside] = drawn_logprobs(rows, tokens.numpy()[inside], drawn)
    return out


def torch_index(mask: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(mask)


def chain_of(logq: np.ndarray, logp: np.ndarray) -> Chain:
    """logq [answer tokens, depth] (-inf where the chain would draft past the answer's end)
    and logp [answer tokens]: min(1, q/p) per position and depth."""
    answer, depth = logq.shape
    accept = np.zeros_like(logq)
    for j in range(depth):
        if answer - j > 0:
            ratio = np.minimum(logq[: answer - j, j] - logp[j:], 0.0)
            accept[: answer - j, j] = np.exp(ratio)
    return encode_chain(accept.tolist(), depth)
