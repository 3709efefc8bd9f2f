"""speculators' own converter (`speculators convert`), through its Python API: how a
checkpoint in another trainer's format becomes one speculators' model classes load
(specforge_ckpt.py: SpecForge's EAGLE-3; dflash_convert.py: z-lab's and SpecForge's DFlash)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from regen.errors import ConfigError


def convert(
    path: Path, out: Path, target_dir: Path, algorithm: str, extra: dict[str, Any], what: str
) -> None:
    """speculators' Python API for `speculators convert --algorithm ALGORITHM`, with its log
    kept quiet; `extra`: the converter's own options (the layers, by input index)."""
    try:
        from loguru import logger
        from speculators.convert import convert_model
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"{what}: speculators' converter cannot load ({exc})",
            hint="rerun scripts/bootstrap.sh (it installs what the converter needs), or convert "
            f"it yourself: `speculators convert DIR --algorithm {algorithm} --verifier TARGET "
            "--output-path OUT`, then pass OUT",
        ) from exc
    logger.disable("speculators")  # its INFO lines would bury score's own
    try:
        convert_model(str(path), str(target_dir), algorithm, output_path=str(out), **extra)
    except (OSError, ValueError, RuntimeError, NotImplementedError, KeyError) as exc:
        raise ConfigError(
            f"{what}: speculators' converter could not convert this checkpoint "
            f"({type(exc).__name__}: {exc})",
            hint="check that --target-model is the target it was trained for, and that its "
            "weights are one model.safetensors or pytorch_model.bin",
        ) from exc
    finally:
        logger.enable("speculators")
