"""The target model loaded with transformers, for drafters that read its hidden states
(EAGLE-3): which folder, and the hidden states at the layers a checkpoint names.

Two conventions name the same hidden state, and an off-by-one between them silently ruins a
drafter, so both are printed:
    input index   layer i is the input of decoder block i (vLLM, SGLang, speculators: vLLM
                  records `hidden_states + residual` before block i; i = L, the number of
                  blocks, is the last block's output, before the final norm);
    output index  layer o is the output of block o (SpecForge, ModelOpt, DFlash): o = i - 1.
transformers' `output_hidden_states` tuple is indexed like the input index, except that its
last entry has the final norm applied; the pass (target_pass.py) takes each layer where the
block reads it, and the last block's output before the final norm.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.score.checkpoints.placement import ON_CPU, Placement

EMBEDDED = "embedded"


def target_folder(spec: str | None, named_by_checkpoint: str | None, flag: str) -> Path:
    """--target-model (a folder, or `embedded`), else the verifier the checkpoint names when
    it is a local folder."""
    if spec == EMBEDDED:
        return embedded_folder()
    chosen = spec or named_by_checkpoint
    if chosen and (Path(chosen).expanduser() / "config.json").is_file():
        return Path(chosen).expanduser()
    if spec:
        which = f"--target-model {spec}"
    elif named_by_checkpoint:
        which = f"the checkpoint names {named_by_checkpoint!r}"
    else:
        which = "the checkpoint names none"
    raise ConfigError(
        f"{flag}: the target model to take hidden states from is not a local Hugging Face "
        f"folder ({which})",
        hint="pass --target-model DIR (the target's Hugging Face folder) or --target-model "
        "embedded for the demo model",
    )


def embedded_folder() -> Path:
    """The embedded GGUF as a Hugging Face folder (built once, cached: serve/hf_model.py)."""
    from regen.embedded_model import default_model_path
    from regen.serve.hf_model import ensure_hf_model, hf_folder

    folder = hf_folder(default_model_path())
    if (folder / "config.json").is_file():
        return folder
    return ensure_hf_model(sys.executable, echo=lambda line: print(line, file=sys.stderr))


def load_causal_lm(folder: Path, threads: int, what: str, placement: Placement = ON_CPU) -> Any:
    """A transformers causal LM at `placement` (a resolved one: placement.py); on the CPU in
    float32 by default (the GGUF-built folder is bf16)."""
    try:
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging
    except ImportError as exc:
        raise ConfigError(
            f"{what} needs torch and transformers", hint="pip install torch transformers"
        ) from exc
    torch.set_num_threads(max(threads, 1))
    logging.disable_progress_bar()  # its bars would fill the command's output
    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), **placement.load_kwargs(what))
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"{what}: transformers cannot load {folder}: {exc}") from exc
    if not placement.split():
        model = model.to(placement.device)
    return model.eval()


def folder_tokens(path: Path, what: str) -> list[str] | None:
    """The folder's own tokenizer's tokens by id, or None without one."""
    if not any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
        return None
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{what}: the tokenizer in {path} cannot be loaded: {exc}") from exc
    return tok.convert_ids_to_tokens(list(range(len(tok))))


def block_count(model: Any) -> int:
    return int(model.config.num_hidden_layers)


def layer_note(layers: Sequence[int], blocks: int) -> str:
    """The layers in both conventions, for the user to check against their trainer's."""
    inputs = ", ".join(str(i) for i in layers)
    outputs = ", ".join(str(i - 1) for i in layers)
    return (
        f"target layers {inputs} as input indices (vLLM, SGLang, speculators) = {outputs} "
        f"as output indices (SpecForge, ModelOpt, DFlash), of {blocks} blocks"
    )


def check_layers(layers: Sequence[int], blocks: int, what: str) -> None:
    if not layers or min(layers) < 0 or max(layers) > blocks:
        raise ConfigError(
            f"{what}: target layers {list(layers)} are not within 0..{blocks} (input indices "
            f"of a target with {blocks} blocks)",
            hint="the checkpoint was trained for another target; pass that target with "
            "--target-model",
        )
