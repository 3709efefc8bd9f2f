"""A SpecForge EAGLE-3 checkpoint (config.json names an architecture such as
LlamaForCausalLMEagle3; weights under midlayer.*), scored through speculators' own converter:
converted into a temporary folder, loaded as speculators' EAGLE-3 head (eagle3_draft.py),
then the folder is removed (the head is in memory by then).

SpecForge counts the target's layers as output indices, speculators as input indices (one
more: hf_target.layer_note), so the layers a SpecForge config names go to the converter
shifted by one. A config that names none gets speculators' default, which is SpecForge's
default in the other convention. SpecForge configs do not name their target: --target-model
says which it is.

The converter reads a few config keys as an older SpecForge wrote them, so it is handed a
copy of config.json (the weights linked, not copied) that says the same in those terms:
- rope_theta / rope_scaling at the top level, where a config saved by transformers 5 keeps
  them under rope_parameters (else the converter takes rope_theta 10000);
- no norm_output: SpecForge's norm_output (true when absent) normalises the state its head
  reads and feeds the raw one back, which is speculators' norm_output false; speculators'
  true feeds the normalised one back. SpecForge's false (a head reading the raw state) has
  no speculators equivalent and is refused.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.score.checkpoints.converter import convert
from regen.score.checkpoints.hf_target import target_folder
from regen.score.checkpoints.settings import CheckpointSettings


def is_specforge_eagle3(architectures: list[str]) -> bool:
    return any(a.endswith("Eagle3") for a in architectures)


def open_specforge(
    path: Path, config: dict[str, Any], settings: CheckpointSettings, *, threads: int
) -> Any:
    from dataclasses import replace

    from regen.score.checkpoints.eagle3_draft import Eagle3Draft

    what = f"--draft {path}"
    if settings.target is None:
        raise ConfigError(
            f"{what}: a SpecForge EAGLE-3 checkpoint does not name the target it was trained for",
            hint="pass --target-model DIR (the target's Hugging Face folder) or --target-model "
            "embedded for the demo model",
        )
    target_dir = target_folder(settings.target, None, what)
    named = (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    layers = [int(i) + 1 for i in named] if named else None
    extra = {"eagle_aux_hidden_state_layer_ids": layers} if layers else {}
    with tempfile.TemporaryDirectory(prefix="regen-specforge-") as tmp:
        converted = Path(tmp) / path.name
        staged_dir = staged(path, config, Path(tmp) / "specforge")
        convert(staged_dir, converted, target_dir, "eagle3", extra, what)
        settings = replace(settings, target=str(target_dir))
        draft = Eagle3Draft(converted, settings, threads=threads, source=path)
    arch = ", ".join(config.get("architectures") or [])
    draft.notes.insert(
        0, f"{path.name}: converted from SpecForge's format ({arch}) with speculators' converter"
    )
    return draft


def staged(path: Path, config: dict[str, Any], out: Path) -> Path:
    """`path` as speculators' converter reads it (see above), in `out`."""
    if config.get("norm_output") is False:
        raise ConfigError(
            f"--draft {path}: a SpecForge head with norm_output false (its lm_head reads the "
            "state before the final norm); speculators' EAGLE-3 has no such head",
            hint="score it by serving it in SGLang and passing --replay-servers URL",
        )
    out.mkdir()
    for file in path.iterdir():
        if file.name != "config.json":
            (out / file.name).symlink_to(file.resolve())
    rope = dict(config.get("rope_parameters") or {})
    lifted = {k: v for k, v in config.items() if k != "norm_output"}
    if "rope_theta" not in config and "rope_theta" in rope:
        lifted["rope_theta"] = rope.pop("rope_theta")
        if rope.get("rope_type", "default") != "default":
            lifted["rope_scaling"] = rope
    (out / "config.json").write_text(json.dumps(lifted))
    return out
