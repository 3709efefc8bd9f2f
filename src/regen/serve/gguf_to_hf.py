"""Turn a GGUF model into a Hugging Face folder (bf16 safetensors, config, tokenizer with its
chat template) that vLLM loads: `PYTHON gguf_to_hf.py MODEL.gguf OUT_DIR`.

Run by file path with the engine's own Python or regen's (torch, transformers, accelerate and
gguf: regen's `gguf` extra), so this file imports nothing of regen. Nothing is downloaded:
the weights, the config and the tokenizer all come out of the GGUF, through transformers'
GGUF loader.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

NEEDED = ("torch", "transformers", "accelerate", "gguf")  # regen's `gguf` extra
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a name that is not local must fail, not fetch


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    logging.disable_progress_bar()  # its bars fill the caller's log with carriage returns

    where, name = str(gguf.parent), gguf.name
    config = AutoConfig.from_pretrained(where, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=torch.float32)
    # A model loaded from a quantised GGUF refuses save_pretrained: its dequantised weights go
    # into a plain model of the same architecture, which saves like any other.
    config.dtype = torch.bfloat16
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise SystemExit(f"gguf_to_hf: weights do not match: missing {missing}, extra {unexpected}")
    plain.save_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=name)
    if not tokenizer.chat_template:
        raise SystemExit(f"gguf_to_hf: {gguf} carries no chat template")
    tokenizer.save_pretrained(out)


def require_modules() -> None:
    """Say at once which module this Python lacks, not after the minute a conversion takes
    to fail on it (transformers asks for accelerate only once the weights load)."""
    missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(f"gguf_to_hf: {sys.executable} has no {', '.join(missing)}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: gguf_to_hf.py MODEL.gguf OUT_DIR")
    require_modules()
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
