"""A DFlash block drafter in speculators' format, run with speculators' own model class on the
CPU and fed by the target's hidden states (hf_target.py; speculators stores DFlash's layers by
input index, as for EAGLE-3: its converter adds 1 to z-lab's).

DFlash drafts a whole block at once: from a verify point after token a (the anchor, the
target's bonus token), the block's first slot holds token a and the others a mask token, and
every slot reads the target's hidden states of the positions before a. Nothing in the block
depends on an earlier proposal, so the block drafted at a is a function of the true prefix
alone and, greedy, is exactly what a real loop drafts there. speculators' training forward
computes blocks at chosen anchors (`_backbone_forward`); here every answer position is one
(all positions the loss mask allows are taken, in order, when there are no more of them than
anchors), a chunk of anchors at a time so that the dense mask stays small. The sequence is
padded by one block of mask tokens at the end because speculators takes no anchor in the last
block_size positions; an anchor reads only positions before it, so the padding is never read.

The outcome is a `Lookup`: per answer position, the block's block_size - 1 drafted tokens and
how many of them, from the first, are right; a k above block_size - 1 drafts only those.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from regen.errors import ConfigError, InputError
from regen.score.checkpoints.hf_target import hidden_at
from regen.score.checkpoints.hidden_draft import HiddenStateDraft
from regen.score.checkpoints.spec_weights import to_target_ids
from regen.score.outcome import Lookup, encode_counts
from regen.score.tokens import Sink, TokenRow

ANCHORS_AT_ONCE = 64  # blocks per forward: the dense mask is (64 * block) x (tokens + that)


class DFlashDraft(HiddenStateDraft):
    kind = "dflash"

    def __init__(self, path: Path, *, threads: int, target: str | None) -> None:
        from speculators.models.dflash import DFlashDraftModel, DFlashSpeculatorConfig

        config = DFlashSpeculatorConfig.from_pretrained(str(path))
        super().__init__(path, config, threads=threads, target=target)
        if config.mask_token_id is None or config.sample_from_anchor:
            raise ConfigError(
                f"{self.what}: a DFlash checkpoint without mask_token_id, or one that samples "
                "from its anchor (DSpark style), which score does not run",
                hint="serve it and use --replay-servers URL",
            )
        self.load(DFlashDraftModel, config, list(config.aux_hidden_state_layer_ids or []))
        self.block = int(config.block_size)
        self.notes = [self.note(f"DFlash, block {self.block}")]

    @property
    def identity(self) -> str:
        return self.identity_of()

    def fits(self, row: TokenRow) -> bool:
        return len(row.ids) + self.block <= self.max_tokens()

    def blocks(self, ids: Sequence[int], anchors: range) -> Any:
        """[len(anchors), block - 1]: the tokens drafted after each anchor (target ids)."""
        import torch

        n, mask = len(ids), self.model.mask_token_id
        tokens = torch.tensor([list(ids) + [mask] * self.block])
        hidden = hidden_at(self.target, tokens[:, :n], self.layers)
        hidden = torch.cat([hidden, hidden.new_zeros(1, self.block, hidden.shape[-1])], dim=1)
        last = hidden.new_zeros(1, tokens.shape[1], self.model.hidden_size)
        out = []
        for at in range(anchors.start, anchors.stop, ANCHORS_AT_ONCE):
            chunk = range(at, min(at + ANCHORS_AT_ONCE, anchors.stop))
            wanted = torch.zeros_like(tokens)
            wanted[0, chunk.start : chunk.stop] = 1
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                _, logits, *_ = self.model._backbone_forward(  # speculators' own blocks
                    hidden,
                    tokens,
                    wanted,
                    last,
                    torch.zeros_like(tokens),
                    max_anchors=len(chunk),
                )
            drafted = logits[0].argmax(dim=-1).view(len(chunk), self.block)[:, 1:]
            out.append(to_target_ids(self.model, drafted))
        return torch.cat(out)

    def lookup(self, ids: Sequence[int], start: int) -> Lookup:
        n, room = len(ids), self.block - 1
        drafted = self.blocks(ids, range(start - 1, n - 1)).tolist()
        counts = []
        for p, block in enumerate(drafted):  # answer position p is drafted after start + p - 1
            at, right = start + p, 0
            while right < room and at + right < n and block[right] == ids[at + right]:
                right += 1
            counts.append(right)
        return Lookup(encode_counts([room] * (n - start)), encode_counts(counts))

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        for row in rows:
            if row.start < 1:
                why = "no prompt token to anchor DFlash's first block"
                sink(row, InputError(f"{row.label}: {why}", kind="short_prompt"))
            else:
                sink(row, self.lookup(row.ids, row.start))
