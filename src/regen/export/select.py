"""Which samples go out, and to which split. Filters are the check rules, applied per sample."""

from __future__ import annotations

from dataclasses import dataclass

import xxhash

from regen.finished.mask import Encoded, is_degenerate
from regen.finished.record import Completion

TRAIN, EVAL = "train", "validation"  # `validation` is a split name datasets recognises


@dataclass(frozen=True)
class Filters:
    drop_degenerate: bool = False
    drop_truncated: bool = False
    min_supervised_tokens: int = 0
    degenerate_at: int = 10

    @property
    def needs_mask(self) -> bool:
        return self.drop_degenerate or self.min_supervised_tokens > 0

    def reason_to_drop(self, completion: Completion, enc: Encoded | None) -> str | None:
        """The name of the first rule this sample breaks, or None to keep it."""
        if self.drop_truncated and completion.finish_reason == "length":
            return "truncated"
        empty = not completion.answer.strip() and not completion.has_tool_calls
        if self.drop_degenerate and is_degenerate(empty, enc, self.degenerate_at):
            return "degenerate"
        if enc is not None and enc.mask_sum < self.min_supervised_tokens:
            return "min_supervised_tokens"
        return None


def split_of(prompt_id: str, eval_fraction: float, seed: int = 0) -> str:
    """Stable across runs and merges: the split depends only on the prompt id's hash (seeded),
    so the samples of one prompt are never in both splits."""
    if eval_fraction <= 0:
        return TRAIN
    bucket = xxhash.xxh64_intdigest(prompt_id.encode(), seed=seed) / 2**64
    return EVAL if bucket < eval_fraction else TRAIN
