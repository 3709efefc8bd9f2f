"""What the drafters that read the target's hidden states share (EAGLE-3: eagle3_draft.py,
DFlash: dflash_draft.py): a checkpoint in speculators' format, run in speculators' own model
class at the target's device and dtype, and the target, loaded with transformers once per
`score` (target_pass.py), whose hidden states at the checkpoint's layers it reads.

A draft scores a row from the states the pass captured (`score`); `run_together` feeds one
pass to every draft that reads the same target, so yours and the reference cost one pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from regen.errors import ConfigError, InputError
from regen.score.checkpoints.hf_target import check_layers, folder_tokens, layer_note, target_folder
from regen.score.checkpoints.sampled_chain import chain_of, sampled_row, target_logp, why_not
from regen.score.checkpoints.settings import CheckpointSettings
from regen.score.checkpoints.spec_weights import load_weights
from regen.score.checkpoints.target_pass import FINAL, TargetPass, Targets
from regen.score.outcome import Lookup, Outcome
from regen.score.tokens import Sink, TokenRow
from regen.score.vocab import check_vocab

Readers = list[tuple["HiddenStateDraft", Sink]]  # the drafts a row is scored by, and their sinks


class HiddenStateDraft:
    kind = ""  # in the identity: "eagle3", "dflash"
    min_prompt = 1  # prompt tokens it needs to draft from
    short_prompt = ""  # why a shorter prompt cannot be scored

    def __init__(
        self,
        path: Path,
        config: Any,
        settings: CheckpointSettings,
        *,
        threads: int,
        source: Path | None = None,
    ) -> None:
        """`config`: the checkpoint's speculators config (its verifier names the default
        target); `source`: the folder the user named, when `path` is a conversion of it
        (specforge_ckpt.py, dflash_convert.py) that is gone once the weights are loaded."""
        self.path, self.source = path, source or path
        self.name, self.what = self.source.name, f"--draft {self.source}"
        named = config.speculators_config.verifier.name_or_path
        self.target_dir = target_folder(settings.target, named, self.what)
        self.own_targets = None if settings.targets else Targets()
        targets = settings.targets or self.own_targets
        assert targets is not None
        self.shared: TargetPass = targets.open(
            self.target_dir, settings.placement, threads, self.what
        )
        self.target_blocks = self.shared.blocks
        self.draws = settings.draws
        self.notes: list[str] = []
        # speculators picks flex attention when unset (compiled, for GPUs). SDPA with a dense
        # mask runs anywhere; on the CPU it holds no per-head score matrix, which eager does
        # (1.4 GB more than SDPA for a 1,500-token row of a 9-head layer at depth 8)
        config.transformer_layer_config._attn_implementation = "sdpa"

    @property
    def target(self) -> Any:
        """The target model (transformers'), shared with the other drafts that read it."""
        return self.shared.model

    def load(self, model_class: Any, config: Any, layers: list[int]) -> None:
        """speculators' model, its weights, and the layers it reads, checked on the target."""
        self.layers = layers
        check_layers(layers, self.target_blocks, self.what)
        model = model_class(config).eval()
        load_weights(model, self.path, self.target, self.what)
        hidden = self.shared.hidden_size
        if model.fc.in_features != len(layers) * hidden:
            raise ConfigError(
                f"{self.what}: it reads {model.fc.in_features} hidden values per token, the "
                f"target gives {len(layers)} layers x {hidden}",
                hint="pass the target it was trained for with --target-model",
            )
        self.device = self.shared.device
        self.model = model.to(device=self.device, dtype=self.shared.placement.torch_dtype)
        self.shared.want(layers)

    def features(self, states: dict[int, Any], n: int) -> Any:
        """[1, n, len(layers) * hidden]: the layers it reads, in its order, as trained."""
        import torch

        return torch.cat([states[i][:n].to(self.device) for i in self.layers], dim=-1)[None]

    def note(self, what: str) -> str:
        """The line printed before scoring: the layers in both conventions."""
        layers = layer_note(self.layers, self.target_blocks)
        where = self.shared.placement.label
        return f"{self.name}: {what}, {layers}; hidden states from {self.target_dir} ({where})"

    def identity_of(self, *extra: str) -> str:
        newest = max(f.stat().st_mtime_ns for f in self.source.iterdir() if f.is_file())
        dtype = self.shared.placement.dtype  # float32 rows keep the identity they had
        return ":".join(
            [
                self.kind,
                str(self.source.resolve()),
                str(newest),
                f"target={self.target_dir.resolve()}",
                *extra,
                *([f"dtype={dtype}"] if dtype != "float32" else []),
                *(["draws=sampled"] if self.draws == "sampled" else []),
            ]
        )

    def check(self, tok: Any) -> None:
        """The drafter drafts in the target's vocabulary: the target must be --tokenizer's."""
        ours = folder_tokens(self.target_dir, self.what)
        if ours is not None:
            check_vocab(ours, tok, f"{self.what}'s target {self.target_dir}")

    def max_tokens(self) -> int:
        return int(getattr(self.target.config, "max_position_embeddings", 0) or 1 << 20)

    def score(self, row: TokenRow, states: dict[int, Any]) -> Outcome | InputError:
        """The row's outcome from the target's states over its tokens (layer -> [n, hidden]):
        on a sampled answer the sampled estimate (sampled_chain.py), else the greedy chain's."""
        if row.start < self.min_prompt:
            return InputError(f"{row.label}: {self.short_prompt}", kind="short_prompt")
        if not sampled_row(row, self.draws):
            return self.lookup(row.ids, row.start, states)
        refused = why_not(row)
        if refused is not None:
            return refused
        logp = target_logp(self.target, row, states[FINAL])
        return chain_of(self.depth_logq(row, states), logp)

    def lookup(self, ids: Sequence[int], start: int, states: dict[int, Any]) -> Lookup:
        raise NotImplementedError

    def depth_logq(self, row: TokenRow, states: dict[int, Any]) -> Any:
        """[answer tokens, depth]: log q of the answer's token at each depth of the chain
        drafted from the verify point before each answer position (-inf past the end)."""
        raise NotImplementedError

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        run_together(self.shared, ((row, [(self, sink)]) for row in rows))

    def close(self) -> None:
        self.model = None
        if self.own_targets is not None:
            self.own_targets.close()


def run_together(shared: TargetPass, rows: Iterable[tuple[TokenRow, Readers]]) -> None:
    """Each row through the target once, in batches, and its states to every draft that
    reads them: with several drafts of the same target, one pass for all."""
    for batch in shared.batches(rows, size=lambda item: len(item[0].ids)):
        states = shared.capture([row.ids for row, _ in batch])
        for (row, readers), got in zip(batch, states, strict=True):
            for draft, sink in readers:
                sink(row, draft.score(row, got))
