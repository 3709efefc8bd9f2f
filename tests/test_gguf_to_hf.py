"""The embedded GGUF as a Hugging Face folder, built by regen's own Python on a fresh HOME:
what `score --target-model embedded` does for an EAGLE-3 or DFlash draft, and bench_drafter
(issue 54). regen's `gguf` extra holds what the conversion imports; a Python without it is
told what to install, and where, before the minute a conversion takes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from regen.embedded_model import default_model_path
from regen.errors import ConfigError
from regen.serve.hf_model import ensure_hf_model, hf_folder

SRC = Path(__file__).parent.parent / "src"


@pytest.mark.model
@pytest.mark.timeout(900)  # the conversion: about a minute quiet, several on a loaded machine
def test_regens_own_python_builds_the_folder_on_a_fresh_home(tmp_path):
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PYTHONPATH": str(SRC),
    }
    code = "from regen.score.checkpoints.hf_target import embedded_folder as f; print(f())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    folder = Path(done.stdout.split()[-1])
    assert folder.parent == tmp_path / "cache" / "regen" / "hf", folder
    assert (folder / "config.json").is_file() and list(folder.glob("*.safetensors"))
    assert (
        "chat_template" in (folder / "tokenizer_config.json").read_text()
        or (folder / "chat_template.jinja").is_file()
    )
    assert "converting SmolLM2-135M-Instruct.Q4_1.gguf" in done.stderr


@pytest.fixture
def without_accelerate(tmp_path, monkeypatch) -> None:
    """Every Python started from here finds no `accelerate` (as a venv without regen's gguf
    extra), and the cache is a fresh one."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['accelerate'] = None\n")
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{SRC}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_regens_own_python_without_the_extra_is_told_to_install_it(without_accelerate):
    gguf = default_model_path()
    with pytest.raises(ConfigError) as caught:
        ensure_hf_model(sys.executable, gguf, echo=lambda _: None)
    assert f"{sys.executable} has no accelerate" in caught.value.message
    assert "pip install 'regen[gguf]'" in (caught.value.hint or "")
    assert ".venv-vllm" not in (caught.value.hint or "")  # not the engine's: regen's own
    assert not list(hf_folder(gguf).parent.iterdir()), "a failed build leaves nothing"


def test_another_python_is_told_to_get_the_engines_modules(without_accelerate, tmp_path):
    other = tmp_path / "python3"
    other.symlink_to(sys.executable)  # outside the venv: the bare interpreter, no torch
    with pytest.raises(ConfigError) as caught:
        ensure_hf_model(str(other), default_model_path(), echo=lambda _: None)
    assert f"{other} has no " in caught.value.message and "accelerate" in caught.value.message
    assert f"{other} needs torch, transformers, accelerate and gguf" in (caught.value.hint or "")
