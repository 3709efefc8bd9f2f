"""What the drafters that read the target's hidden states share (EAGLE-3: eagle3_draft.py,
DFlash: dflash_draft.py): a checkpoint in speculators' format, run in speculators' own model
class, and the target, loaded with transformers, whose hidden states at the checkpoint's layers
it reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.score.checkpoints.hf_target import (
    block_count,
    check_layers,
    folder_tokens,
    layer_note,
    load_causal_lm,
    target_folder,
)
from regen.score.checkpoints.spec_weights import load_weights
from regen.score.vocab import check_vocab


class HiddenStateDraft:
    kind = ""  # in the identity: "eagle3", "dflash"

    def __init__(
        self,
        path: Path,
        config: Any,
        *,
        threads: int,
        target: str | None,
        source: Path | None = None,
    ) -> None:
        """`config`: the checkpoint's speculators config (its verifier names the default
        target); `target`: --target-model; `source`: the folder the user named, when `path`
        is a conversion of it (specforge_ckpt.py) that is gone once the weights are loaded."""
        self.path, self.source = path, source or path
        self.name, self.what = self.source.name, f"--draft {self.source}"
        named = config.speculators_config.verifier.name_or_path
        self.target_dir = target_folder(target, named, self.what)
        self.target = load_causal_lm(self.target_dir, threads, self.what)
        self.target_blocks = block_count(self.target)
        # speculators picks flex attention when unset (compiled, for GPUs). SDPA with a dense
        # mask runs anywhere; on the CPU it holds no per-head score matrix, which eager does
        # (1.4 GB more than SDPA for a 1,500-token row of a 9-head layer at depth 8)
        config.transformer_layer_config._attn_implementation = "sdpa"

    def load(self, model_class: Any, config: Any, layers: list[int]) -> None:
        """speculators' model, its weights, and the layers it reads, checked on the target."""
        self.layers = layers
        check_layers(layers, self.target_blocks, self.what)
        self.model = model_class(config).eval()
        load_weights(self.model, self.path, self.target, self.what)
        hidden = self.target.config.hidden_size
        if self.model.fc.in_features != len(layers) * hidden:
            raise ConfigError(
                f"{self.what}: it reads {self.model.fc.in_features} hidden values per token, the "
                f"target gives {len(layers)} layers x {hidden}",
                hint="pass the target it was trained for with --target-model",
            )

    def note(self, what: str) -> str:
        """The line printed before scoring: the layers in both conventions."""
        layers = layer_note(self.layers, self.target_blocks)
        return f"{self.name}: {what}, {layers}; hidden states from {self.target_dir}"

    def identity_of(self, *extra: str) -> str:
        newest = max(f.stat().st_mtime_ns for f in self.source.iterdir() if f.is_file())
        return ":".join(
            [
                self.kind,
                str(self.source.resolve()),
                str(newest),
                f"target={self.target_dir.resolve()}",
                *extra,
            ]
        )

    def check(self, tok: Any) -> None:
        """The drafter drafts in the target's vocabulary: the target must be --tokenizer's."""
        ours = folder_tokens(self.target_dir, self.what)
        if ours is not None:
            check_vocab(ours, tok, f"{self.what}'s target {self.target_dir}")

    def max_tokens(self) -> int:
        return int(getattr(self.target.config, "max_position_embeddings", 0) or 1 << 20)

    def close(self) -> None:
        self.model = self.target = None
