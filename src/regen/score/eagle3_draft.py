"""An EAGLE-3 head in speculators' format, run with speculators' own model class on the CPU and
fed by the target's hidden states (the target loaded with transformers: hf_target.py).

EAGLE-3 is recurrent: its step t+1 reads its own hidden state from step t, not the target's,
so the teacher-forced top-1 is not the chain's outcome. What is exact, for a greedy chain
against fixed answer tokens: while the chain matches the answer, the tokens it was fed are
the answer's own, so speculators' test-time-training forward (`ttt_steps` = D, tokens fed
from the answer, hidden states carried from the draft's previous step, each step attending to
the target's prefix and its own earlier steps at that position) gives at every position p the
chain a real speculative loop would draft from a verify point at p, up to its first miss.
Its inputs are aligned as speculators trains them (eagle3/data.py shift_batch): the draft at
index i reads token i + 1 and the target's hidden state at i, and step j predicts token
i + 2 + j.

The outcome is a `Lookup` (outcome.py): per answer position, a draft of D tokens and how many
of them, from the first, are right; D is the longest k reported, so any k <= D replays it.
The chain is greedy: at a temperature it is a deterministic draft's outcome (outcome.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from regen.errors import ConfigError, InputError
from regen.score.hf_target import (
    block_count,
    check_layers,
    folder_tokens,
    hidden_at,
    layer_note,
    load_causal_lm,
    target_folder,
)
from regen.score.outcome import Lookup, encode_counts
from regen.score.spec_weights import load_weights, to_target_ids
from regen.score.tokens import Sink, TokenRow
from regen.score.vocab import check_vocab


class Eagle3Draft:
    def __init__(self, path: Path, *, threads: int, target: str | None, depth: int) -> None:
        from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig

        self.path, self.name, self.depth = path, path.name, depth
        self.what = f"--draft {path}"
        config = Eagle3SpeculatorConfig.from_pretrained(str(path))
        named = config.speculators_config.verifier.name_or_path
        self.target_dir = target_folder(target, named, self.what)
        self.target = load_causal_lm(self.target_dir, threads, self.what)
        blocks = block_count(self.target)
        # speculators' own default when the checkpoint names none (models/utils.py)
        self.layers = list(config.eagle_aux_hidden_state_layer_ids or
                           [2, blocks // 2, blocks - 3])  # fmt: skip
        check_layers(self.layers, blocks, self.what)
        # speculators picks flex attention when unset (compiled, for GPUs). SDPA with a dense
        # mask runs anywhere; on the CPU it holds no per-head score matrix, which eager does
        # (1.4 GB more than SDPA for a 1,500-token row of a 9-head layer at depth 8)
        config.transformer_layer_config._attn_implementation = "sdpa"
        self.model = Eagle3DraftModel(config).eval()
        load_weights(self.model, path, self.target, self.what)
        self._check_fc()
        self.n_ctx = min(_max_positions(config.transformer_layer_config),
                         _max_positions(self.target.config))  # fmt: skip
        self.notes = [f"{self.name}: EAGLE-3, {layer_note(self.layers, blocks)}; "
                      f"hidden states from {self.target_dir}"]  # fmt: skip

    def _check_fc(self) -> None:
        hidden = self.target.config.hidden_size
        if self.model.fc.in_features != len(self.layers) * hidden:
            raise ConfigError(
                f"{self.what}: it reads {self.model.fc.in_features} hidden values per token, the "
                f"target gives {len(self.layers)} layers x {hidden}",
                hint="pass the target it was trained for with --target-model",
            )

    @property
    def identity(self) -> str:
        newest = max(f.stat().st_mtime_ns for f in self.path.iterdir() if f.is_file())
        return (f"eagle3:{self.path.resolve()}:{newest}:target={self.target_dir.resolve()}:"
                f"depth={self.depth}")  # fmt: skip

    def check(self, tok: Any) -> None:
        """The head drafts in the target's vocabulary: the target folder must be --tokenizer's."""
        ours = folder_tokens(self.target_dir, self.what)
        if ours is not None:
            check_vocab(ours, tok, f"{self.what}'s target {self.target_dir}")

    def fits(self, row: TokenRow) -> bool:
        return len(row.ids) <= self.n_ctx

    def chains(self, ids: Sequence[int]) -> Any:
        """[depth, len(ids) - 1]: step j's greedy token at index i, a guess for ids[i + 2 + j]."""
        import torch

        n = len(ids)
        tokens = torch.tensor([list(ids)])
        hidden = hidden_at(self.target, tokens[:, : n - 1], self.layers)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # transformers' renamed kwargs
            steps = self.model(hidden_states=hidden, input_ids=tokens[:, 1:],
                               document_ids=torch.zeros_like(tokens[:, 1:]),
                               ttt_steps=self.depth)  # fmt: skip
        return to_target_ids(self.model, torch.stack([s[0] for s in steps]))

    def lookup(self, ids: Sequence[int], start: int) -> Lookup:
        import torch

        n = len(ids)
        drafted = self.chains(ids)
        truth = torch.full((self.depth, n - 1), -1, dtype=torch.long)
        for j in range(self.depth):  # row j: ids[i + 2 + j], -1 past the end (a miss)
            if n - 2 - j > 0:
                truth[j, : n - 2 - j] = torch.tensor(ids[2 + j :])
        right = (drafted == truth).long().cumprod(dim=0).sum(dim=0).tolist()
        # answer position p is drafted from the verify point after token start + p - 1
        counts = [right[start + p - 2] for p in range(n - start)]
        return Lookup(encode_counts([self.depth] * (n - start)), encode_counts(counts))

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        for row in rows:
            if row.start < 2:
                why = "a prompt of fewer than 2 tokens gives EAGLE-3 no hidden state to start"
                sink(row, InputError(f"{row.label}: {why}", kind="short_prompt"))
            else:
                sink(row, self.lookup(row.ids, row.start))

    def close(self) -> None:
        self.model = self.target = None


def _max_positions(config: Any) -> int:
    return int(getattr(config, "max_position_embeddings", 0) or 1 << 20)
