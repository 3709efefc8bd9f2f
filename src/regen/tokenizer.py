"""Load the target model's tokenizer and chat template: a local directory, a hub name, or GGUF.

Masks are built from character offsets, so only "fast" (Rust) tokenizers are accepted: a slow
tokenizer has no offset mapping and would force us back to guessing by regex.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from regen import tokenizer_cache
from regen.errors import ConfigError
from regen.hub import check_repo, looks_like_path


def load_tokenizer(
    spec: str, *, chat_template: str | None = None, require_template: bool = True
) -> Any:
    """Return a fast `PreTrainedTokenizerBase` for `spec`, with a chat template.

    `spec` is a directory holding tokenizer files, a `.gguf` file (transformers converts its
    vocabulary and reads the template from its metadata), or a hub name.
    `chat_template` (a path to a Jinja file) overrides the tokenizer's own template.
    `embedded` names the GGUF of the embedded default model (SmolLM2), the demo's target.
    """
    from transformers import AutoTokenizer

    if spec == "embedded":
        from regen.embedded_model import default_model_path

        spec = str(default_model_path())
    path = Path(spec).expanduser()
    gguf: Path | None = None
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ConfigError(f"--tokenizer {spec}: no such GGUF file")
        source, gguf = str(path), path
    elif path.exists():
        if not path.is_dir():
            raise ConfigError(
                f"--tokenizer {spec} is a file but not a .gguf file",
                hint="pass the directory that holds tokenizer.json, a .gguf file or a hub name",
            )
        source = str(path)
    elif looks_like_path(spec):
        raise ConfigError(
            f"--tokenizer {spec}: no such directory",
            hint="pass the directory that holds tokenizer.json, a .gguf file or a hub name",
        )
    else:
        source = spec
        if not _cached(source):
            check_repo(source, "model", "--tokenizer")
    try:
        tok = _from_gguf(gguf) if gguf else AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError, ImportError) as exc:
        raise ConfigError(
            f"cannot load a tokenizer from {spec}: {exc}",
            hint="pass a local tokenizer directory, a .gguf file, or a hub name you can reach",
        ) from exc
    if not tok.is_fast:
        raise ConfigError(
            f"the tokenizer of {spec} is a slow (Python) tokenizer without offsets",
            hint="use a model with a tokenizer.json (transformers converts most on load)",
        )
    if chat_template is not None:
        tok.chat_template = _read_template(chat_template)
    if require_template and not tok.chat_template:
        raise ConfigError(
            f"the tokenizer of {spec} has no chat template",
            hint="pass the target's template with --chat-template FILE.jinja",
        )
    return tok


def _from_gguf(gguf: Path) -> Any:
    """The GGUF's tokenizer from the cache, else converted (and cached: tokenizer_cache)."""
    tok = tokenizer_cache.load_cached(gguf)
    if tok is not None:
        return tok
    _needs_gguf_reader(str(gguf))
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer_cache.save(gguf, tok)
    return tok


def _cached(name: str) -> bool:
    """Whether the Hub model's tokenizer is in the local cache (then no network is needed)."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(name, "tokenizer_config.json"), str)


def _read_template(path: str) -> str:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"--chat-template {path}: no such file")
    return file.read_text(encoding="utf-8")


def _needs_gguf_reader(spec: str) -> None:
    """transformers reads a GGUF's vocabulary with the `gguf` package and torch, which the
    demo's install leaves out (they are the `gguf` extra): say so before it fails deep inside."""
    missing = [name for name in ("gguf", "torch") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"--tokenizer {spec}: reading a tokenizer out of a GGUF file needs "
            f"{' and '.join(missing)}, which are not installed",
            hint="pip install 'regen[gguf]' (in a checkout: scripts/bootstrap.sh --dev), "
            "or pass the target's tokenizer directory or hub name",
        )
