"""A speculators DFlash drafter written in the two other formats teams hold (for the format
tests): z-lab's, by hand from what its checkpoints are (config.json as on the Hub, z-lab's
remote code named by auto_map, the body's weights only), and SpecForge's, by SpecForge's own
DFlashDraftModel (its save_pretrained). Both from the same weights, so every format must
score the same; and SpecForge's own forward drafting in a real loop (the truth for the
converted checkpoints, from code other than speculators')."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from drafter_helpers import Propose, hidden_by_hooks

BODY = ("layers.", "fc.", "hidden_norm.", "norm.")  # what both formats keep of a drafter


def _spec(head: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """speculators' config, its draft layer's config and the body's weights."""
    from safetensors.torch import load_file

    spec = json.loads((head / "config.json").read_text())
    layer = {
        k: v
        for k, v in spec["transformer_layer_config"].items()
        if k not in ("architectures", "transformers_version", "_attn_implementation")
    }
    state = load_file(str(head / "model.safetensors"))
    return spec, layer, {k: v for k, v in state.items() if k.startswith(BODY)}


def zlab_dflash(head: Path, out: Path, target_blocks: int) -> Path:
    """As z-lab publishes DFlash drafters (the newer schema: block_size under dflash_config);
    target layers as output indices, one less than speculators' input indices."""
    from safetensors.torch import save_file

    spec, layer, body = _spec(head)
    out.mkdir(parents=True)
    config = {
        **layer,
        "architectures": ["DFlashDraftModel"],
        "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        "model_type": "qwen3",
        "num_target_layers": target_blocks,
        "dflash_config": {
            "block_size": spec["block_size"],
            "mask_token_id": spec["mask_token_id"],
            "target_layer_ids": [i - 1 for i in spec["aux_hidden_state_layer_ids"]],
        },
    }
    (out / "config.json").write_text(json.dumps(config, indent=1))
    (out / "dflash.py").write_text("# z-lab's remote code (not run by score)\n")
    save_file(body, str(out / "model.safetensors"))
    return out


def specforge_dflash(head: Path, out: Path, target_blocks: int) -> Path:
    """The same drafter saved by SpecForge's DFlashDraftModel (its own class and
    save_pretrained; strict loading proves the weights' names are SpecForge's)."""
    from specforge.modeling.draft.dflash import DFlashDraftModel
    from transformers import Qwen3Config

    spec, layer, body = _spec(head)
    config = Qwen3Config(
        **{k: v for k, v in layer.items() if k != "model_type"},
        block_size=spec["block_size"],
        num_target_layers=target_blocks,
        dflash_config={
            "mask_token_id": spec["mask_token_id"],
            "target_layer_ids": [i - 1 for i in spec["aux_hidden_state_layer_ids"]],
        },
    )
    model = DFlashDraftModel(config)
    model.load_state_dict(body, strict=True)
    model.save_pretrained(str(out))
    return out


def specforge_proposer(folder: Path, target: Any) -> Propose:
    """SpecForge's own DFlashDraftModel drafting one block at each verify point as its
    spec_generate does: the block is [the last known token, mask...] at the positions after
    the known ones, attending (not causally) to the target's states of the tokens before it
    (its extract_context_feature: hidden_states[id + 1]), read through the target's head."""
    import torch
    from specforge.modeling.draft.dflash import DFlashDraftModel

    model = DFlashDraftModel.from_pretrained(str(folder)).eval()
    layers = [i + 1 for i in model.target_layer_ids]  # as input indices: hidden_by_hooks'

    def propose(known: list[int], k: int) -> list[int]:
        context = hidden_by_hooks(target, known, layers)  # the states of known[:-1]
        block = [known[-1]] + [model.mask_token_id] * (model.block_size - 1)
        with torch.no_grad():
            noise = target.model.embed_tokens(torch.tensor([block]))
            positions = torch.arange(len(known) - 1 + model.block_size)[None]
            drafted = model(
                position_ids=positions,
                noise_embedding=noise,
                target_hidden=context,
                use_cache=False,
                is_causal=False,
            )
            logits = target.lm_head(drafted[:, 1:])
        return [int(t) for t in logits[0].argmax(dim=-1)[:k]]

    return propose


def draft_body(draft: Any) -> dict[str, Any]:
    """The converted drafter's own weights (what the formats carry), for equality."""
    return {k: v for k, v in draft.model.state_dict().items() if k.startswith(BODY)}


def layers_of(folder: Path) -> Sequence[int]:
    return json.loads((folder / "config.json").read_text())["aux_hidden_state_layer_ids"]
