"""The embedded GGUF as a Hugging Face folder, for engines that load only those (vLLM).

Built, never downloaded: `gguf_to_hf.py` runs in the engine's own Python (for `serve`) or in
regen's (for `score` and the benches: the `gguf` extra) and writes the folder
under the cache (~/.cache/regen/hf/, or $XDG_CACHE_HOME/regen/hf/), named after the GGUF's
content hash, so a new GGUF gets a new folder and a folder is never half-written: it is built
in a temporary folder beside it and renamed into place.

`python -m regen.serve.hf_model --python ENGINE_PYTHON` builds it (scripts/bootstrap.sh --test).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from regen.cache_dir import cache_dir
from regen.embedded_model import default_model_path
from regen.errors import ConfigError

CONVERTER = Path(__file__).with_name("gguf_to_hf.py")
BUILD_TIMEOUT = 900.0  # about a minute on two busy cores; a stuck build must not hang serve


def cache_root() -> Path:
    return cache_dir("hf")


def gguf_identity(gguf: Path) -> str:
    """The first 16 hex digits of the file's sha256: the same bytes, the same folder."""
    digest = hashlib.sha256()
    with open(gguf, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def hf_folder(gguf: Path) -> Path:
    return cache_root() / f"{gguf.stem}-{gguf_identity(gguf)}"


def ensure_hf_model(python: str, gguf: Path | None = None, echo=print) -> Path:
    """The HF folder of `gguf` (default: the embedded model), built with `python` if absent."""
    gguf = gguf or default_model_path()
    target = hf_folder(gguf)
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    echo(f"converting {gguf.name} into a Hugging Face folder, once: {target}")
    partial = Path(tempfile.mkdtemp(prefix=target.name + ".partial.", dir=target.parent))
    try:
        _run_converter(python, gguf, partial)
        try:
            partial.rename(target)
        except OSError:
            if not (target / "config.json").is_file():  # not merely another build finishing first
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)  # nothing is left when the rename happened
    return target


def _run_converter(python: str, gguf: Path, out: Path) -> None:
    command = [python, str(CONVERTER), str(gguf), str(out)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(
            f"cannot convert {gguf.name} with {python}: {exc}",
            hint=_install_hint(python),
        ) from None
    if done.returncode != 0:
        tail = "\n    ".join(done.stderr.strip().splitlines()[-8:]) or "(no output)"
        raise ConfigError(
            f"converting {gguf.name} into a Hugging Face folder failed:\n    {tail}",
            hint=_install_hint(python),
        )


def _install_hint(python: str) -> str:
    """What to install, and where: regen's own environment converts for `score` and the
    benches, an engine's (vLLM's) for `serve`."""
    if Path(python).absolute() == Path(sys.executable).absolute():
        return (
            "install regen's gguf extra in regen's own environment: pip install "
            "'regen[gguf]' (torch, transformers, accelerate, gguf; scripts/bootstrap.sh --dev "
            "installs it)"
        )
    return (
        f"{python} needs torch, transformers, accelerate and gguf: install them there, or "
        "point --python at the engine's Python (scripts/bootstrap.sh --test makes .venv-vllm)"
    )


def embedded_model(engine: str, python: str, echo=print) -> Path:
    """What `--model embedded` is for this engine: llama.cpp serves the GGUF itself; the
    others load the Hugging Face folder built from it."""
    gguf = default_model_path()
    return gguf if engine == "llamacpp" else ensure_hf_model(python, gguf, echo)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python", required=True, help="the engine's Python (torch + transformers)"
    )
    parser.add_argument("--gguf", type=Path, help="a GGUF file [the embedded model]")
    args = parser.parse_args()
    print(f"embedded model as a Hugging Face folder: {ensure_hf_model(args.python, args.gguf)}")


if __name__ == "__main__":
    main()
