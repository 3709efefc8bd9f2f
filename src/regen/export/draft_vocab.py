"""The draft vocabulary of an EAGLE-3 drafter: the N most frequent supervised target tokens.

Trainers compute it at training start, on GPU machines, from the same loss-masked tokens
`check` already has; here it is a CPU job of the export. The mapping is the one both trainers
load: `d2t[i]` is the offset from draft id i to its target id (target = i + d2t[i], draft ids
in ascending target order) and `t2d` marks the target ids in the draft vocabulary.

    OUT/draft_vocab/d2t-N.npy, t2d-N.npy     speculators (--d2t-path / --t2d-path)
    OUT/draft_vocab/vocab_mapping-N.pt       SpecForge (model.vocab_mapping_path), with torch

When N exceeds the number of distinct supervised tokens, the vocabulary is padded with the
lowest unused target ids, as both trainers pad it, rather than failing.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from regen.errors import ConfigError
from regen.jsonio import atomic_write_bytes

FOLDER = "draft_vocab"
CURVE = (1024, 2048, 4096, 8192, 16384, 32000, 32768, 65536, 131072)


@dataclass(frozen=True)
class DraftVocab:
    d2t: np.ndarray  # int64, size N
    t2d: np.ndarray  # bool, size target_vocab_size
    coverage: float  # share of supervised tokens the chosen ids cover
    padded: int  # ids added with zero frequency to reach N


def build(counts: Counter, size: int, target_vocab_size: int) -> DraftVocab:
    """The top-`size` ids by frequency (ties: lower id first), padded with unused low ids."""
    if size < 1:
        raise ConfigError("--draft-vocab-size must be at least 1")
    if size > target_vocab_size:
        raise ConfigError(
            f"--draft-vocab-size {size} is larger than the target vocabulary "
            f"({target_vocab_size} ids)",
            hint="choose a draft vocabulary smaller than the target's",
        )
    beyond = [t for t in counts if t >= target_vocab_size]
    if beyond:
        raise ConfigError(
            f"supervised token id {max(beyond)} is outside the target vocabulary of "
            f"{target_vocab_size} ids",
            hint="pass --target-vocab-size (the model config's vocab_size)",
        )
    chosen = sorted(counts, key=lambda t: (-counts[t], t))[:size]
    taken = set(chosen)
    pad = (t for t in range(target_vocab_size) if t not in taken)
    padding = [next(pad) for _ in range(size - len(chosen))]
    ids = np.array(sorted(chosen + padding), dtype=np.int64)
    t2d = np.zeros(target_vocab_size, dtype=bool)
    t2d[ids] = True
    total = sum(counts.values())
    covered = sum(counts[t] for t in chosen)
    return DraftVocab(
        ids - np.arange(size, dtype=np.int64), t2d, covered / total if total else 0.0, len(padding)
    )


def coverage_curve(counts: Counter, size: int) -> dict[str, float]:
    """Share of supervised tokens covered by the top n ids, for the usual n and for `size`."""
    freqs = sorted(counts.values(), reverse=True)
    total = sum(freqs) or 1
    cumulative = np.cumsum(freqs) if freqs else np.array([0])
    points = sorted({n for n in CURVE if n < len(freqs)} | {size, len(freqs)} - {0})
    return {str(n): round(float(cumulative[min(n, len(freqs)) - 1]) / total, 4) for n in points}


def write(out_dir: Path, counts: Counter, size: int, target_vocab_size: int) -> dict[str, Any]:
    """Write the mapping files; return what the card and the summary say about them."""
    vocab = build(counts, size, target_vocab_size)
    folder = out_dir / FOLDER
    folder.mkdir(exist_ok=True)
    files = {f"d2t-{size}.npy": _npy(vocab.d2t), f"t2d-{size}.npy": _npy(vocab.t2d)}
    torch_file = _torch_bytes(vocab)
    if torch_file is not None:
        files[f"vocab_mapping-{size}.pt"] = torch_file
    for name, data in files.items():
        atomic_write_bytes(folder / name, data)
    return {
        "size": size,
        "target_vocab_size": target_vocab_size,
        "distinct": len(counts),
        "masked_tokens": sum(counts.values()),
        "coverage": round(vocab.coverage, 4),
        "padded": vocab.padded,
        "curve": coverage_curve(counts, size),
        "files": sorted(f"{FOLDER}/{name}" for name in files),
        "file": f"{FOLDER}/",
    }


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _torch_bytes(vocab: DraftVocab) -> bytes | None:
    """SpecForge's file is a torch pickle; without torch (the `gguf` extra) only the .npy."""
    try:
        import torch
    except ImportError:
        return None
    buffer = io.BytesIO()
    torch.save({"d2t": torch.from_numpy(vocab.d2t), "t2d": torch.from_numpy(vocab.t2d)}, buffer)
    return buffer.getvalue()


def target_vocab_size(tok: Any, tokenizer: str | None, given: int | None) -> int:
    """The model's vocabulary size: --target-vocab-size, else the model config beside the
    tokenizer (its vocab_size can exceed the tokenizer's length: padded embeddings), else the
    tokenizer's length."""
    if given:
        return given
    config = Path(tokenizer or "") / "config.json"
    if tokenizer and config.is_file():
        import json

        data = json.loads(config.read_text())
        size = (data.get("text_config") or data).get("vocab_size")
        if isinstance(size, int):
            return size
    return len(tok)
