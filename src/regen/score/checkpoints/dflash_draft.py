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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.score.checkpoints.hidden_draft import HiddenStateDraft
from regen.score.checkpoints.sampled_chain import depth_logq, draft_ids
from regen.score.checkpoints.settings import CheckpointSettings
from regen.score.checkpoints.spec_weights import to_target_ids
from regen.score.outcome import Lookup, encode_counts
from regen.score.tokens import TokenRow

ANCHORS_AT_ONCE = 64  # blocks per forward: the dense mask is (64 * block) x (tokens + that)


class DFlashDraft(HiddenStateDraft):
    kind = "dflash"
    short_prompt = "no prompt token to anchor DFlash's first block"

    def __init__(
        self,
        path: Path,
        settings: CheckpointSettings,
        *,
        threads: int,
        source: Path | None = None,
    ) -> None:
        import torch
        from speculators.models.dflash import DFlashDraftModel, DFlashSpeculatorConfig

        config = DFlashSpeculatorConfig.from_pretrained(str(path))
        super().__init__(path, config, settings, threads=threads, source=source)
        if config.mask_token_id is None or config.sample_from_anchor:
            raise ConfigError(
                f"{self.what}: a DFlash checkpoint without mask_token_id, or one that samples "
                "from its anchor (DSpark style), which score does not run",
                hint="serve it and use --replay-servers URL",
            )
        self.load(DFlashDraftModel, config, list(config.aux_hidden_state_layer_ids or []))
        # _backbone_forward also computes its training targets through the verifier's head
        # ([block tokens x vocabulary] per chunk, as much as a fifth of a 27B target's pass),
        # which scoring never reads: an identity there spares that product
        self.model.verifier_lm_head = torch.nn.Identity()
        self.block = int(config.block_size)
        self.notes = [self.note(f"DFlash, block {self.block}")]

    @property
    def identity(self) -> str:
        return self.identity_of()

    def fits(self, row: TokenRow) -> bool:
        return len(row.ids) + self.block <= self.max_tokens()

    def block_logits(
        self, ids: Sequence[int], anchors: range, states: dict[int, Any]
    ) -> Iterator[tuple[int, Any]]:
        """Per chunk of anchors: its first anchor's offset in `anchors` and the blocks'
        logits, [anchors in the chunk, block, draft vocabulary] (slot 0 holds the anchor)."""
        import torch

        n, mask = len(ids), self.model.mask_token_id
        tokens = torch.tensor([list(ids) + [mask] * self.block], device=self.device)
        hidden = self.features(states, n)
        hidden = torch.cat([hidden, hidden.new_zeros(1, self.block, hidden.shape[-1])], dim=1)
        last = hidden.new_zeros(1, tokens.shape[1], self.model.hidden_size)
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
            yield at - anchors.start, logits[0].view(len(chunk), self.block, -1)

    def blocks(self, ids: Sequence[int], anchors: range, states: dict[int, Any]) -> Any:
        """[len(anchors), block - 1]: the tokens drafted after each anchor (target ids)."""
        import torch

        out = [
            to_target_ids(self.model, logits[:, 1:].argmax(dim=-1)).cpu()
            for _, logits in self.block_logits(ids, anchors, states)
        ]
        return torch.cat(out)

    def lookup(self, ids: Sequence[int], start: int, states: dict[int, Any]) -> Lookup:
        n, room = len(ids), self.block - 1
        drafted = self.blocks(ids, range(start - 1, n - 1), states).tolist()
        counts = []
        for p, block in enumerate(drafted):  # answer position p is drafted after start + p - 1
            at, right = start + p, 0
            while right < room and at + right < n and block[right] == ids[at + right]:
                right += 1
            counts.append(right)
        return Lookup(encode_counts([room] * (n - start)), encode_counts(counts))

    def depth_logq(self, row: TokenRow, states: dict[int, Any]) -> Any:
        """Slot s of the block anchored after answer position p - 1 drafts answer token
        p + s - 1: its q there (depth s - 1), from the blocks' logits."""
        import numpy as np

        ids, start = row.ids, row.start
        answer, room = len(ids) - start, self.block - 1
        logq = np.full((answer, room), -np.inf)
        for p0, logits in self.block_logits(ids, range(start - 1, len(ids) - 1), states):
            for j in range(room):
                last = min(len(logits), answer - j - p0)  # positions whose token exists
                if last > 0:
                    tokens = draft_ids(self.model, ids[start + p0 + j : start + p0 + j + last])
                    logq[p0 : p0 + last, j] = depth_logq(logits[:last, j + 1], tokens, row.drawn)
        return logq
