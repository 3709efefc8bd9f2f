"""Drafters users train, built small for the embedded SmolLM2 (its Hugging Face folder, built
by bootstrap --test from the GGUF), and a real greedy speculative loop to hold `score`'s
figures against.

The loop is the truth: at each verify point the draft proposes k tokens from its own state,
feeding its own proposals back (never the answer's tokens), and the proposals are verified
against the run's stored answer tokens. They came from llama.cpp's quantized model, so a loop
that let the (dequantized) HF target generate would score other answers: accepted is what
matches the stored answer, and the target's own next token is the stored one, as accept.py
counts (the first answer token is the prefill's; a draft past the answer's end is rejected)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Propose = Callable[[list[int], int], list[int]]  # (known tokens, k) -> k draft tokens


DRAFT_VOCAB = 1024  # of the target's 49,152


VLLM_PYTHON = Path(__file__).parent.parent / ".venv-vllm" / "bin" / "python"


def target_dir() -> Path:
    from regen.serve.hf_model import ensure_hf_model

    return ensure_hf_model(str(VLLM_PYTHON), echo=lambda _: None)


@functools.cache  # the target, read-only, for every drafter built in a test process
def load(folder: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)  # two cores shared by many: spinning threads only slow it down
    return AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()


def truncated_draft(target: Path, out: Path, blocks: int) -> Path:
    """The target's first `blocks` blocks with its norm and head: a draft model that shares its
    tokenizer (saved beside it) and agrees with it part of the time."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(str(target))
    config.num_hidden_layers = blocks
    model = AutoModelForCausalLM.from_pretrained(str(target), config=config, dtype=torch.float32)
    model.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(target)).save_pretrained(str(out))
    return out


def eagle3_head(
    target: Path,
    out: Path,
    layers: Sequence[int],
    rows: Sequence[list[int]],
    seed: int = 0,
    rope_theta: float = 10000.0,
) -> Path:
    """A one-layer EAGLE-3 head in speculators' format, random but for its lm_head, fitted in
    closed form on `rows` (token ids): each draft token's row is the mean of the head's own
    first-step features where it is the token to draft (a nearest-centroid readout). Its
    first step is then mostly right on these rows; its later steps run on its own hidden
    states, which it was never fitted on, so a real chain accepts neither 0 nor k. It drafts
    in a reduced vocabulary mapped back by d2t, as EAGLE-3 heads do (32K of a 128K target's):
    the rows' tokens and the lowest other ids, DRAFT_VOCAB in all."""
    import torch
    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig
    from transformers import LlamaConfig

    model_t = load(target)
    tc = model_t.config
    layer = LlamaConfig(
        vocab_size=tc.vocab_size,
        hidden_size=tc.hidden_size,
        intermediate_size=256,
        num_hidden_layers=1,
        num_attention_heads=tc.num_attention_heads,
        num_key_value_heads=tc.num_key_value_heads,
        rms_norm_eps=tc.rms_norm_eps,
        max_position_embeddings=tc.max_position_embeddings,
        rope_theta=rope_theta,
    )
    layer._attn_implementation = "eager"
    kept = _draft_vocab(rows, tc.vocab_size)
    proposal = GreedyTokenProposalConfig(speculative_tokens=3)
    config = Eagle3SpeculatorConfig(
        transformer_layer_config=layer,
        draft_vocab_size=len(kept),
        eagle_aux_hidden_state_layer_ids=list(layers),
        speculators_config=SpeculatorsConfig(
            algorithm="eagle3",
            proposal_methods=[proposal],
            default_proposal_method="greedy",
            verifier=VerifierConfig.from_pretrained(str(target)),
        ),
    )
    torch.manual_seed(seed)
    head = Eagle3DraftModel(config).eval()
    index = torch.tensor(kept)
    t2d = torch.zeros(tc.vocab_size, dtype=torch.bool)
    t2d[index] = True
    head.load_vocab_mappings(t2d, index - torch.arange(len(kept)))  # d2t: offsets
    with torch.no_grad():
        # what speculators' load_verifier_weights would copy from the target
        head.embed_tokens.weight.copy_(model_t.get_input_embeddings().weight)
        head.verifier_lm_head.weight.copy_(model_t.lm_head.weight[index])
        head.lm_head.weight.copy_(_centroids(head, model_t, layers, rows, kept))
    head.save_pretrained(str(out))
    return out


def _centroids(
    head: Any, target: Any, layers: Sequence[int], rows: Sequence[list[int]], kept: list[int]
) -> Any:
    """[draft vocab, hidden]: per draft token, the mean first-step feature (the normed state
    the lm_head reads) over the positions where it comes next, unit length."""
    import torch

    features: list[Any] = []
    hook = head.norm.register_forward_hook(lambda _m, _a, o: features.append(o[0]))
    sums = torch.zeros(len(kept), head.hidden_size)
    try:
        for ids in rows:
            features.clear()
            fed = torch.tensor([ids[1:]])
            head(
                hidden_states=hidden_by_hooks(target, ids, layers),
                input_ids=fed,
                document_ids=torch.zeros_like(fed),
                ttt_steps=1,
            )
            for i, token in enumerate(ids[2:]):  # index i drafts ids[i + 2]
                sums[kept.index(token)] += features[0][i]
    finally:
        hook.remove()
    return 4.0 * sums / sums.norm(dim=1, keepdim=True).clamp(min=1e-6)


def hf_proposer(model: Any) -> Propose:
    """A draft model drafting greedily from its own tokens, with its KV cache as engines run
    it: the known tokens once, then one token at a time."""
    import torch

    def propose(known: list[int], k: int) -> list[int]:
        drafted: list[int] = []
        fed, past = known, None
        with torch.no_grad():
            for _ in range(k):
                out = model(input_ids=torch.tensor([fed]), past_key_values=past, use_cache=True)
                past = out.past_key_values
                drafted.append(int(out.logits[0, -1].argmax()))
                fed = drafted[-1:]
        return drafted

    return propose


def hidden_by_hooks(target: Any, known: list[int], layers: Sequence[int]) -> Any:
    """The target's hidden states over known[:-1] at `layers` (input indices), taken by
    output index: block i - 1's output, from hooks (not the code under test)."""
    import torch

    seen: dict[int, Any] = {}
    hooks = [
        target.model.layers[i - 1].register_forward_hook(
            lambda _m, _a, o, i=i: seen.__setitem__(i, o[0] if isinstance(o, tuple) else o)
        )
        for i in layers
    ]
    try:
        with torch.no_grad():
            target.model(input_ids=torch.tensor([known[:-1]]))
    finally:
        for hook in hooks:
            hook.remove()
    return torch.cat([seen[i] for i in layers], dim=-1)


def eagle3_proposer(head: Any, target: Any, layers: Sequence[int]) -> Propose:
    """An EAGLE-3 head drafting from its own state: the target's hidden states over the known
    tokens, then step after step with its own proposals fed back (speculators' forward run
    once more per step); only the query at the verify point is read."""
    import torch

    def propose(known: list[int], k: int) -> list[int]:
        m = len(known) - 1  # the last known token's index; the head reads it at index m - 1
        hidden = hidden_by_hooks(target, known, layers)
        drafted: list[int] = []
        with torch.no_grad():
            for j in range(k):
                fed = torch.tensor([known[1:] + drafted])
                pad = hidden.new_zeros(1, j, hidden.shape[-1])
                steps = head(
                    hidden_states=torch.cat([hidden, pad], dim=1),
                    input_ids=fed,
                    document_ids=torch.zeros_like(fed),
                    ttt_steps=j + 1,
                )
                token = int(steps[j][0, m - 1])
                drafted.append(token if head.d2t is None else token + int(head.d2t[token]))
        return drafted

    return propose


def loop_tau(rows: list[tuple[str, list[int], int]], propose: Propose, k: int) -> dict[str, float]:
    """Per category, tokens per verify step: rows are (category, prompt + answer ids, start)."""
    tokens: dict[str, int] = {}
    steps: dict[str, int] = {}
    for category, ids, start in rows:
        pos = start + 1  # the first answer token comes from the prefill
        while pos < len(ids):
            drafted = propose(ids[:pos], k)
            accepted = 0
            while (
                accepted < k
                and pos + accepted < len(ids)
                and drafted[accepted] == ids[pos + accepted]
            ):
                accepted += 1
            steps[category] = steps.get(category, 0) + 1
            tokens[category] = tokens.get(category, 0) + accepted + 1
            pos += accepted + 1
    return {c: tokens[c] / steps[c] for c in steps}


def stored_rows(run: Path) -> list[tuple[str, list[int], int]]:
    import json

    rows = []
    for line in (run / "completions" / "00000.jsonl").read_text().splitlines():
        rec = json.loads(line)
        prompt, answer = rec["token_ids"]["prompt"], rec["token_ids"]["completion"]
        rows.append((rec["category"], prompt + answer, len(prompt)))
    return rows


def _draft_vocab(rows: Sequence[list[int]], size: int) -> list[int]:
    seen = {t for ids in rows for t in ids}
    return sorted(seen | set([i for i in range(size) if i not in seen][: DRAFT_VOCAB - len(seen)]))


def specforge_eagle3(head: Path, out: Path, layers: Sequence[int]) -> Path:
    """The speculators EAGLE-3 head in folder `head` as SpecForge 0.2.0 saves one
    (LlamaForCausalLMEagle3): a LlamaConfig with draft_vocab_size and the layers as output
    indices under eagle_config, saved by this transformers (rope under rope_parameters); the
    weights with the layer under midlayer.* and none of the target's (verifier_*)."""
    from safetensors.torch import load_file, save_file
    from transformers import LlamaConfig

    spec = json.loads((head / "config.json").read_text())
    layer = {
        k: v
        for k, v in spec["transformer_layer_config"].items()
        if k not in ("architectures", "model_type", "transformers_version")
    }
    config = LlamaConfig(
        **layer,
        draft_vocab_size=spec["draft_vocab_size"],
        eagle_config={"eagle_aux_hidden_state_layer_ids": [i - 1 for i in layers]},
    )
    config.architectures = ["LlamaForCausalLMEagle3"]
    config.save_pretrained(str(out))
    state = load_file(str(head / "model.safetensors"))
    save_file(
        {
            k.replace("layers.0.", "midlayer.", 1): v
            for k, v in state.items()
            if not k.startswith("verifier_")
        },
        str(out / "model.safetensors"),
    )
    return out
