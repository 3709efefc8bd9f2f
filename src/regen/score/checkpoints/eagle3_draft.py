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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from regen.score.checkpoints.hidden_draft import HiddenStateDraft
from regen.score.checkpoints.sampled_chain import depth_logq, draft_ids
from regen.score.checkpoints.settings import CheckpointSettings
from regen.score.checkpoints.spec_weights import to_target_ids
from regen.score.outcome import Lookup, encode_counts
from regen.score.tokens import TokenRow


class Eagle3Draft(HiddenStateDraft):
    kind = "eagle3"
    min_prompt = 2
    short_prompt = "a prompt of fewer than 2 tokens gives EAGLE-3 no hidden state to start"

    def __init__(
        self,
        path: Path,
        settings: CheckpointSettings,
        *,
        threads: int,
        source: Path | None = None,
    ) -> None:
        from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig

        config = Eagle3SpeculatorConfig.from_pretrained(str(path))
        super().__init__(path, config, settings, threads=threads, source=source)
        self.depth = settings.depth
        # speculators' own default when the checkpoint names none (models/utils.py)
        blocks = self.target_blocks
        self.load(
            Eagle3DraftModel,
            config,
            list(config.eagle_aux_hidden_state_layer_ids or [2, blocks // 2, blocks - 3]),
        )
        layer_positions = getattr(config.transformer_layer_config, "max_position_embeddings", 0)
        self.n_ctx = min(int(layer_positions or 1 << 20), self.max_tokens())
        self.notes = [self.note("EAGLE-3")]

    @property
    def identity(self) -> str:
        return self.identity_of(f"depth={self.depth}")

    def fits(self, row: TokenRow) -> bool:
        return len(row.ids) <= self.n_ctx

    def chains(self, ids: Sequence[int], states: dict[int, Any]) -> Any:
        """[depth, len(ids) - 1]: step j's greedy token at index i, a guess for ids[i + 2 + j]."""
        import torch

        n = len(ids)
        tokens = torch.tensor([list(ids)], device=self.device)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # transformers' renamed kwargs
            steps = self.model(
                hidden_states=self.features(states, n - 1),
                input_ids=tokens[:, 1:],
                document_ids=torch.zeros_like(tokens[:, 1:]),
                ttt_steps=self.depth,
            )
        return to_target_ids(self.model, torch.stack([s[0] for s in steps])).cpu()

    def lookup(self, ids: Sequence[int], start: int, states: dict[int, Any]) -> Lookup:
        import torch

        n = len(ids)
        drafted = self.chains(ids, states)
        truth = torch.full((self.depth, n - 1), -1, dtype=torch.long)
        for j in range(self.depth):  # row j: ids[i + 2 + j], -1 past the end (a miss)
            if n - 2 - j > 0:
                truth[j, : n - 2 - j] = torch.tensor(ids[2 + j :])
        right = (drafted == truth).long().cumprod(dim=0).sum(dim=0).tolist()
        # answer position p is drafted from the verify point after token start + p - 1
        counts = [right[start + p - 2] for p in range(n - start)]
        return Lookup(encode_counts([self.depth] * (n - start)), encode_counts(counts))

    def depth_logq(self, row: TokenRow, states: dict[int, Any]) -> Any:
        """Step j of the chain at index i drafts ids[i + 2 + j]: its q there, read from the
        head's logits at each step (the same forward as `chains`, tokens fed from the
        answer, as the chain is while it matches)."""
        import numpy as np

        ids, start = row.ids, row.start
        answer = len(ids) - start
        logq = np.full((answer, self.depth), -np.inf)

        seen = [0]  # steps so far: the head runs once per step

        def step(_m: Any, _a: Any, logits: Any) -> None:
            j = seen[0]
            seen[0] += 1
            if answer - j > 0:  # index start - 2 + p drafts answer token p + j
                tokens = draft_ids(self.model, ids[start + j :])
                rows = logits[0, start - 2 : len(ids) - 2 - j]
                logq[: answer - j, j] = depth_logq(rows, tokens, row.drawn)

        hook = self.model.lm_head.register_forward_hook(step)
        try:
            self.chains(ids, states)
        finally:
            hook.remove()
        return logq
