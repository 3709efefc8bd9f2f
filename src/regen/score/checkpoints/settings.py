"""What a checkpoint folder needs besides itself: the target it reads (--target-model), where
and at which precision it runs (--device, --dtype, --max-batch-tokens), how many tokens a
recurrent drafter proposes per step, and the target passes it may share with the others."""

from __future__ import annotations

from dataclasses import dataclass

from regen.score.checkpoints.placement import ON_CPU, Placement
from regen.score.checkpoints.target_pass import Targets
from regen.score.results import TAU_K


@dataclass(frozen=True)
class CheckpointSettings:
    """`targets`: the target passes opened so far, shared by every checkpoint that reads the
    same target (open_drafts makes one); None: the checkpoint opens its own."""

    target: str | None = None
    depth: int = TAU_K
    placement: Placement = ON_CPU
    targets: Targets | None = None
    draws: str = "sampled"  # on sampled answers: "sampled" (chain.py) or "argmax" (greedy)


DEFAULT = CheckpointSettings()
