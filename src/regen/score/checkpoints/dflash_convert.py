"""A DFlash drafter in z-lab's format (the reference checkpoints, z-lab/*-DFlash*) or as
SpecForge saves one (its DFlashDraftModel), scored through speculators' own converter
(`speculators convert --algorithm dflash`): converted into a temporary folder, loaded as
speculators' DFlash (dflash_draft.py), then the folder is removed.

The two formats are one layout: config.json is the draft's Qwen3 config with
`architectures: ["DFlashDraftModel"]`, `block_size` (newer z-lab configs keep it under
`dflash_config`), `num_target_layers` and `dflash_config: {target_layer_ids, mask_token_id}`;
the weights are the draft's body only (`layers.*`, `fc`, `hidden_norm`, `norm`), the embedding
and the head being the target's. z-lab's carry `auto_map` (their remote code); SpecForge's
do not. Neither names its target: --target-model says which it is, and its block count is
checked against `num_target_layers`.

Layers: `target_layer_ids` are output indices (z-lab reads hidden_states[id + 1]); they go to
the converter as input indices (id + 1), all of them. Left to itself the converter drops a
layer equal to the target's last block, as vLLM's training pipeline adds that one apart,
which leaves the drafter's `fc` a layer short for scoring.

Other drafters of the DFlash family (DFlash2, DSpark, Domino: another architecture, or a
`projector_type`) are refused with what to do.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.score.checkpoints.converter import convert
from regen.score.checkpoints.hf_target import target_folder
from regen.score.checkpoints.settings import CheckpointSettings

ARCHITECTURE = "DFlashDraftModel"


def is_dflash_family(config: dict[str, Any]) -> bool:
    architectures = [str(a) for a in config.get("architectures") or []]
    return config.get("dflash_config") is not None or any("DFlash" in a for a in architectures)


def trainer_of(config: dict[str, Any]) -> str:
    """Whose format: z-lab's checkpoints load through their remote code (auto_map)."""
    return "z-lab" if config.get("auto_map") else "SpecForge"


def open_dflash(
    path: Path, config: dict[str, Any], settings: CheckpointSettings, *, threads: int
) -> Any:
    from regen.score.checkpoints.dflash_draft import DFlashDraft

    what, trainer = f"--draft {path}", trainer_of(config)
    refuse_other_kinds(path, config)
    if settings.target is None:
        raise ConfigError(
            f"{what}: a {trainer} DFlash checkpoint does not name the target it was trained for",
            hint="pass --target-model DIR (the target's Hugging Face folder) or --target-model "
            "embedded for the demo model",
        )
    target_dir = target_folder(settings.target, None, what)
    layers = input_layers(path, config, target_dir)
    with tempfile.TemporaryDirectory(prefix="regen-dflash-") as tmp:
        converted = Path(tmp) / path.name
        extra = {"aux_hidden_state_layer_ids": layers}
        convert(path, converted, target_dir, "dflash", extra, what)
        settings = replace(settings, target=str(target_dir))
        draft = DFlashDraft(converted, settings, threads=threads, source=path)
    arch = ", ".join(config.get("architectures") or [ARCHITECTURE])
    draft.notes.insert(
        0,
        f"{path.name}: converted from {trainer}'s DFlash format ({arch}) with speculators' "
        "converter",
    )
    return draft


def refuse_other_kinds(path: Path, config: dict[str, Any]) -> None:
    architectures = [str(a) for a in config.get("architectures") or [ARCHITECTURE]]
    projector = (config.get("dflash_config") or {}).get("projector_type")
    if architectures != [ARCHITECTURE] or projector:
        kind = projector or ", ".join(architectures)
        raise ConfigError(
            f"--draft {path}: a drafter of the DFlash family ({kind}) that `score` does not "
            "run offline; it runs DFlash itself (DFlashDraftModel)",
            hint="serve it (SGLang or vLLM) and pass --replay-servers URL",
        )


def input_layers(path: Path, config: dict[str, Any], target_dir: Path) -> list[int]:
    """The layers it reads as input indices, checked against the target's block count."""
    named = (config.get("dflash_config") or {}).get("target_layer_ids")
    if not named:
        raise ConfigError(
            f"--draft {path}: its config.json names no dflash_config.target_layer_ids",
            hint="add the target layers it was trained on (output indices, as z-lab and "
            "SpecForge count them) under dflash_config.target_layer_ids",
        )
    blocks = target_blocks(target_dir)
    expected = config.get("num_target_layers")
    if expected is not None and blocks is not None and int(expected) != blocks:
        raise ConfigError(
            f"--draft {path}: trained for a target of {expected} blocks (num_target_layers); "
            f"--target-model {target_dir} has {blocks}",
            hint="pass the target it was trained for with --target-model",
        )
    return [int(i) + 1 for i in named]


def target_blocks(target_dir: Path) -> int | None:
    try:
        config = json.loads((target_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None  # transformers says what is wrong with it when it loads
    text = config.get("text_config") or config
    blocks = text.get("num_hidden_layers")
    return int(blocks) if isinstance(blocks, int) else None
