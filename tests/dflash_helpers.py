"""A DFlash drafter built small for the embedded SmolLM2, and its blocks run as a real
speculative loop does, to hold `score`'s figures for DFlash against (drafter_helpers.py
has the loop itself and the other drafters)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from drafter_helpers import Propose, _draft_vocab, hidden_by_hooks, load


def dflash_head(
    target: Path,
    out: Path,
    layers: Sequence[int],
    rows: Sequence[list[int]],
    block: int = 4,
    seed: int = 0,
) -> Path:
    """A one-layer DFlash drafter in speculators' format, random but for its lm_head, fitted in
    closed form on `rows` as eagle3_head's is (over every slot of every block), with the same
    reduced vocabulary."""
    import torch

    model_t = load(target)
    kept = _draft_vocab(rows, model_t.config.vocab_size)
    head = _dflash_model(target, layers, block, kept, seed)
    sums = torch.zeros(len(kept), model_t.config.hidden_size)
    with torch.no_grad():
        head.embed_tokens.weight.copy_(model_t.get_input_embeddings().weight)
        for ids in rows:
            features = dflash_blocks(head, model_t, layers, ids, range(len(ids) - 1), features=True)
            for a in range(len(ids) - 1):
                for s in range(1, block):
                    if a + s < len(ids):
                        sums[kept.index(ids[a + s])] += features[a, s]
        head.lm_head.weight.copy_(4.0 * sums / sums.norm(dim=1, keepdim=True).clamp(min=1e-6))
    head.save_pretrained(str(out))
    return out


def _dflash_model(
    target: Path,
    layers: Sequence[int],
    block: int,
    kept: list[int] | None,
    seed: int = 0,
    intermediate: int = 256,
) -> Any:
    """speculators' DFlash, one Qwen3 layer, random; drafting in `kept` (target ids, mapped
    back by d2t) or, None, in the target's whole vocabulary."""
    import torch
    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.models.dflash import DFlashDraftModel, DFlashSpeculatorConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig
    from transformers import Qwen3Config

    tc = load(target).config
    layer = Qwen3Config(
        vocab_size=tc.vocab_size,
        hidden_size=tc.hidden_size,
        intermediate_size=intermediate,
        num_hidden_layers=1,
        num_attention_heads=tc.num_attention_heads,
        num_key_value_heads=tc.num_key_value_heads,
        head_dim=tc.hidden_size // tc.num_attention_heads,
        rms_norm_eps=tc.rms_norm_eps,
        max_position_embeddings=tc.max_position_embeddings,
    )
    layer._attn_implementation = "eager"
    config = DFlashSpeculatorConfig(
        transformer_layer_config=layer,
        draft_vocab_size=len(kept) if kept else tc.vocab_size,
        block_size=block,
        aux_hidden_state_layer_ids=list(layers),
        mask_token_id=DFLASH_MASK,
        speculators_config=SpeculatorsConfig(
            algorithm="dflash",
            default_proposal_method="greedy",
            proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=block - 1)],
            verifier=VerifierConfig.from_pretrained(str(target)),
        ),
    )
    torch.manual_seed(seed)
    head = DFlashDraftModel(config).eval()
    if kept:
        index = torch.tensor(kept)
        t2d = torch.zeros(tc.vocab_size, dtype=torch.bool)
        t2d[index] = True
        head.load_vocab_mappings(t2d, index - torch.arange(len(kept)))
    return head


DFLASH_MASK = 0  # the mask token's id (any id the answers do not need)


def dflash_blocks(
    head: Any,
    target: Any,
    layers: Sequence[int],
    ids: list[int],
    anchors: range,
    features: bool = False,
    logits: bool = False,
) -> Any:
    """speculators' blocks after `anchors` over ids, each reading only the target's hidden
    states before its anchor (taken by hooks over ids[:-1] is enough for the last anchor):
    [anchors, block] features (the normed state the lm_head reads), logits, or
    draft-vocabulary ids."""
    import torch

    block, n = head.block_size, len(ids)
    tokens = torch.tensor([ids + [DFLASH_MASK] * block])
    hidden = hidden_by_hooks(target, ids, layers)  # positions 0..n-2
    hidden = torch.cat([hidden, hidden.new_zeros(1, 1 + block, hidden.shape[-1])], dim=1)
    wanted = torch.zeros_like(tokens)
    wanted[0, anchors.start : anchors.stop] = 1
    seen: list[Any] = []
    hook = head.norm.register_forward_hook(lambda _m, _a, o: seen.append(o[0]))
    try:
        with torch.no_grad():
            _, scores, *_ = head._backbone_forward(
                hidden,
                tokens,
                wanted,
                hidden.new_zeros(1, n + block, head.hidden_size),
                torch.zeros_like(tokens),
                max_anchors=len(anchors),
            )
    finally:
        hook.remove()
    if features:
        return seen[0].view(len(anchors), block, -1)
    if logits:
        return scores[0].view(len(anchors), block, -1)
    return scores[0].argmax(dim=-1).view(len(anchors), block)


def dflash_proposer(head: Any, target: Any, layers: Sequence[int]) -> Propose:
    """A DFlash drafter at each verify point on the known tokens alone: one block anchored at
    the last of them, its first k drafted tokens (k < block)."""

    def propose(known: list[int], k: int) -> list[int]:
        drafted = dflash_blocks(head, target, layers, known, range(len(known) - 1, len(known)))
        tokens = [int(t) for t in drafted[0, 1 : k + 1]]
        return [t if head.d2t is None else t + int(head.d2t[t]) for t in tokens]

    return propose


def dflash_full_vocab(
    target: Path, out: Path, layers: Sequence[int], rows: Sequence[list[int]], block: int = 4
) -> Path:
    """A one-layer DFlash drafter over the target's whole vocabulary, its head the target's
    own (as z-lab's and SpecForge's DFlash drafters are: their formats have no draft
    vocabulary), random but for its layer's MLP output, fitted in closed form on `rows`: at
    every slot of every block, least squares towards a state whose logits under the target's
    head peak at one token ((E^T E)^-1 E[t], for head E): the right one, but for one slot in
    three, where it is confidently wrong (the next id), so that a real loop accepts neither
    none nor all of a block, and no guess is a near-tie that a bf16 rounding would flip (a
    random drafter's are)."""
    import torch

    model_t = load(target)
    head = _dflash_model(target, layers, block, None, intermediate=1024)
    mlp = head.layers[-1].mlp
    with torch.no_grad():
        head.embed_tokens.weight.copy_(model_t.get_input_embeddings().weight)
        head.lm_head.weight.copy_(model_t.get_output_embeddings().weight)
        mlp.down_proj.weight.zero_()  # the layer's output is then its state before the MLP
    seen: dict[str, Any] = {}
    hooks = [
        mlp.down_proj.register_forward_pre_hook(lambda _m, a: seen.__setitem__("phi", a[0][0])),
        head.norm.register_forward_pre_hook(lambda _m, a: seen.__setitem__("state", a[0][0])),
    ]
    phi, base, want = [], [], []
    emb = model_t.get_output_embeddings().weight.double()
    solve = torch.linalg.inv(emb.T @ emb)
    try:
        for ids in rows:
            dflash_blocks(head, model_t, layers, ids, range(len(ids) - 1))
            for a in range(len(ids) - 1):
                for s in range(1, block):
                    if a + s < len(ids):
                        token = ids[a + s] + ((a + s) % 3 == 0)  # one in three: wrong
                        phi.append(seen["phi"][a * block + s])
                        base.append(seen["state"][a * block + s])
                        want.append(solve @ emb[token])
    finally:
        for hook in hooks:
            hook.remove()
    phi_t, base_t, want_t = torch.stack(phi).double(), torch.stack(base).double(), torch.stack(want)
    want_t *= 10 * base_t.norm(dim=1, keepdim=True) / want_t.norm(dim=1, keepdim=True)
    gram = phi_t.T @ phi_t + 1e-3 * torch.eye(phi_t.shape[1], dtype=torch.double)
    weight = torch.linalg.solve(gram, phi_t.T @ (want_t - base_t)).T
    with torch.no_grad():
        mlp.down_proj.weight.copy_(weight.float())
    head.save_pretrained(str(out))
    return out
