"""Where regen keeps what it can build again: converted tokenizers, a GGUF's model folder
for vLLM, a bucket run's local staging. `$XDG_CACHE_HOME/regen`, else `~/.cache/regen`;
deleting it is always safe (it costs the rebuild)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base, "regen", *parts)
