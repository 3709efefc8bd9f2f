"""A speculators checkpoint's tensors into speculators' own model class, without speculators'
loader: `from_pretrained` fetches the verifier's embedding and head by its recorded name (a Hub
id, often) through a module that needs loguru, which the trainers' no-deps install lacks.
What a trainer leaves out because it is the target's (the frozen embedding; DFlash's head over
the full vocabulary) is taken from the target loaded here instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from regen.errors import ConfigError

TARGETS_OWN = ("verifier_lm_head.weight", "verifier_norm.weight", "t2d", "d2t")


def load_weights(model: Any, path: Path, target: Any, what: str) -> None:
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"{what}: no .safetensors weights in the folder")
    state: dict[str, Any] = {}
    for file in files:
        state.update(load_file(str(file)))
    state.setdefault("embed_tokens.weight", target.get_input_embeddings().weight)
    if not model.use_draft_vocab:
        state.setdefault("lm_head.weight", target.get_output_embeddings().weight)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k not in TARGETS_OWN]
    if missing or unexpected:
        raise ConfigError(
            f"{what}: its weights do not fit speculators' model "
            f"(missing {missing[:4]}, unexpected {unexpected[:4]})",
            hint="was it written by another trainer? convert it with `speculators convert`",
        )
    if model.use_draft_vocab and "d2t" not in state:
        raise ConfigError(
            f"{what}: a draft vocabulary of {model.draft_vocab_size} tokens without its d2t "
            "map to the target's ids",
            hint="save the checkpoint with its d2t and t2d tensors (speculators does)",
        )


def to_target_ids(model: Any, drafted: Any) -> Any:
    """Draft-vocabulary ids to the target's: d2t holds offsets; None, the same vocabulary."""
    return drafted if model.d2t is None else drafted + model.d2t[drafted]
