"""A GGUF's tokenizer, converted once: transformers rebuilds the vocabulary out of a GGUF's
metadata at every load (7 s for the embedded model's 49K tokens, longer for a large one), so
each `check`, `export` or `score` paid it again. The converted tokenizer is saved as a plain
tokenizer folder under the cache (~/.cache/regen/tokenizers/, or $XDG_CACHE_HOME/...) and
loaded from there (a third of a second) while the GGUF is unchanged.

A folder is named after the GGUF's path, size and modification time and the transformers
version that converted it (reading a 20 GB file to hash it would cost more than converting),
is written beside its final name and renamed into place, and is kept only when it loads back
as the same tokenizer (the same vocabulary, special tokens, template and ids on a probe).
A cache that cannot be written (a read-only home) costs the conversion, nothing else.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from regen.cache_dir import cache_dir

log = logging.getLogger("regen.tokenizer")

PROBE = "Hello <|im_start|> wörld 123\n\t  return f(x)  # 日本語 😀"


def cache_root() -> Path:
    return cache_dir("tokenizers")


def cached_folder(gguf: Path) -> Path:
    import transformers

    stat = gguf.stat()
    facts = f"{gguf.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{transformers.__version__}"
    return cache_root() / f"{gguf.stem}-{hashlib.sha256(facts.encode()).hexdigest()[:16]}"


def load_cached(gguf: Path) -> Any | None:
    """The tokenizer saved for this GGUF, or None when there is none yet. A folder that no
    longer loads (edited, half deleted) is removed, and the GGUF is converted again."""
    from transformers import AutoTokenizer

    folder = cached_folder(gguf)
    if not (folder / "tokenizer_config.json").is_file():
        return None
    try:
        return AutoTokenizer.from_pretrained(str(folder))
    except Exception as exc:  # the Rust tokenizer raises a bare Exception on a bad file
        log.warning(
            "the cached tokenizer %s does not load (%s): converting %s again",
            folder,
            exc,
            gguf.name,
        )
        shutil.rmtree(folder, ignore_errors=True)
        return None


def save(gguf: Path, tok: Any) -> None:
    """Keep `tok` (just converted from `gguf`) for the next load, if it reloads the same."""
    from transformers import AutoTokenizer

    folder = cached_folder(gguf)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=folder.name + ".partial.", dir=folder.parent))
    except OSError as exc:
        log.warning("the converted tokenizer is not cached (%s): the next load converts again", exc)
        return
    try:
        tok.save_pretrained(str(partial))
        if not same_tokenizer(tok, AutoTokenizer.from_pretrained(str(partial))):
            log.warning("%s: its tokenizer does not reload the same; it is not cached", gguf)
            return
        try:
            partial.rename(folder)
        except OSError:
            if not (folder / "tokenizer_config.json").is_file():  # not another process first
                raise
    except OSError as exc:
        log.warning("the converted tokenizer is not cached (%s): the next load converts again", exc)
    finally:
        shutil.rmtree(partial, ignore_errors=True)  # nothing is left when the rename happened


def same_tokenizer(a: Any, b: Any) -> bool:
    """What the masks depend on: vocabulary, special tokens, template and the ids of a probe
    (with the template's own tokens in it)."""
    probe = PROBE + "".join(str(t) for t in a.all_special_tokens)

    def facts(tok: Any) -> tuple:
        specials = {i: (str(t), t.special) for i, t in tok.added_tokens_decoder.items()}
        ids = tok.backend_tokenizer.encode(probe, add_special_tokens=False).ids
        return (
            tok.get_vocab(),
            specials,
            tok.all_special_ids,
            tok.chat_template,
            ids,
            tok(probe)["input_ids"],
            tok.bos_token,
            tok.eos_token,
            tok.pad_token,
            tok.is_fast,
        )

    return facts(a) == facts(b)


__all__ = ["cached_folder", "load_cached", "same_tokenizer", "save"]
