"""`--draft DIR`: which kind of drafter a checkpoint folder holds, read from its config.json.

    speculators_model_type "eagle3"     an EAGLE-3 head in speculators' format (eagle3_draft.py)
    speculators_model_type "dflash"     a DFlash block drafter in speculators' format
                                        (dflash_draft.py)
    architectures "...Eagle3"           a SpecForge EAGLE-3 head (LlamaForCausalLMEagle3),
                                        converted by speculators' converter (specforge_ckpt.py)
    architectures "DFlashDraftModel"    a DFlash drafter in z-lab's format or as SpecForge saves
                                        it, converted by speculators' converter (dflash_convert.py)
    architectures "...ForCausalLM"      a draft model sharing the target's tokenizer (hf_draft.py)

Other speculators kinds (DSpark, MTP, ...) and other trainers' formats are refused with what
to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from regen.errors import ConfigError
from regen.score.checkpoints.dflash_convert import is_dflash_family
from regen.score.checkpoints.settings import CheckpointSettings
from regen.score.checkpoints.specforge_ckpt import is_specforge_eagle3

KINDS_HINT = (
    "`score` reads: a Hugging Face causal-LM draft (architectures ...ForCausalLM); speculators' "
    "EAGLE-3 and DFlash (speculators_model_type); SpecForge's EAGLE-3 (...ForCausalLMEagle3); "
    "z-lab's and SpecForge's DFlash (DFlashDraftModel). Another trainer's checkpoint: "
    "`speculators convert DIR --algorithm eagle3|dflash --verifier TARGET --output-path OUT`, "
    "then pass OUT"
)


def read_config(path: Path) -> dict[str, Any]:
    config = path / "config.json"
    if not config.is_file():
        raise ConfigError(
            f"--draft {path}: a folder without config.json",
            hint="pass a Hugging Face draft model or a speculators checkpoint folder",
        )
    try:
        data = orjson.loads(config.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"--draft {path}: config.json is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"--draft {path}: config.json is not a JSON object")
    return data


def kind_of(path: Path, config: dict[str, Any]) -> str:
    """ "eagle3", "dflash", "specforge-eagle3", "dflash-external" (z-lab's or SpecForge's) or
    "causal-lm"; ConfigError for a drafter `score` cannot run."""
    spec_type = config.get("speculators_model_type")
    architectures = [str(a) for a in config.get("architectures") or []]
    if spec_type in ("eagle3", "dflash"):
        return spec_type
    if spec_type is not None:
        raise ConfigError(
            f"--draft {path}: a speculators {spec_type!r} checkpoint; `score` runs EAGLE-3 "
            "and DFlash checkpoints and Hugging Face draft models",
            hint="serve it and use --replay-servers URL, or --from-engine on a run the "
            "speculating fleet generated",
        )
    if is_specforge_eagle3(architectures):
        return "specforge-eagle3"
    if is_dflash_family(config):
        return "dflash-external"
    if any("eagle" in a.lower() for a in architectures):
        raise ConfigError(
            f"--draft {path}: an EAGLE checkpoint in another trainer's format "
            f"({', '.join(architectures)})",
            hint="convert it to speculators' format first (`speculators convert DIR --algorithm "
            "eagle3 --verifier TARGET --output-path OUT`), then pass OUT",
        )
    if any(a.endswith("ForCausalLM") for a in architectures):
        return "causal-lm"
    raise ConfigError(
        f"--draft {path}: config.json names no causal-LM architecture and no speculators "
        f"model type (architectures: {architectures or 'none'})",
        hint=KINDS_HINT,
    )


def open_checkpoint(path: Path, settings: CheckpointSettings, *, threads: int) -> Any:
    """The drafter in folder `path`; `settings`: what a drafter that reads the target's
    hidden states needs (the target, where it runs, how deep a chain goes)."""
    config = read_config(path)
    kind = kind_of(path, config)
    if kind == "eagle3":
        from regen.score.checkpoints.eagle3_draft import Eagle3Draft

        return Eagle3Draft(path, settings, threads=threads)
    if kind == "specforge-eagle3":
        from regen.score.checkpoints.specforge_ckpt import open_specforge

        return open_specforge(path, config, settings, threads=threads)
    if kind == "dflash":
        from regen.score.checkpoints.dflash_draft import DFlashDraft

        return DFlashDraft(path, settings, threads=threads)
    if kind == "dflash-external":
        from regen.score.checkpoints.dflash_convert import open_dflash

        return open_dflash(path, config, settings, threads=threads)
    from regen.score.checkpoints.hf_draft import HFDraft

    return HFDraft(path, config, threads=threads, placement=settings.placement.resolved())
