"""Tokenise rendered conversations and turn character ranges into a loss mask.

A token is supervised when its first character lies in a supervised range. Each assistant
turn's range is extended over trailing whitespace to the end-of-turn token (a special token
such as `<|im_end|>`), because the drafter must learn to stop. `template_tokens` decides what
happens to text the template inserted before the turn's own text (an empty
`<think></think>` block, a `<think>` opener): "train" supervises it like the model's output
(the server generated everything after the generation prompt), "context" leaves it unmasked.
The generation prompt itself is always context: the model never produced it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from regen.check.render import Rendered, TurnChars
from regen.errors import InputError


@dataclass(frozen=True)
class Encoded:
    input_ids: list[int]
    spans: list[tuple[int, int]]  # supervised token ranges, end-exclusive, sorted, disjoint
    final_generated: tuple[int, int]  # token range the server generated for the final turn
    offsets: list[tuple[int, int]]
    text: str

    @property
    def mask_sum(self) -> int:
        return sum(end - start for start, end in self.spans)

    @property
    def longest_run(self) -> int:
        return max((end - start for start, end in self.spans), default=0)

    def loss_mask(self) -> list[int]:
        mask = [0] * len(self.input_ids)
        for start, end in self.spans:
            mask[start:end] = [1] * (end - start)
        return mask


def special_ids(tok: Any) -> frozenset[int]:
    """Ids that can close a turn: every special token of the tokenizer."""
    ids = set(tok.all_special_ids)
    ids.update(i for i, t in tok.added_tokens_decoder.items() if t.special)
    return frozenset(ids)


def tokenize_all(tok: Any, texts: Sequence[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """One batched call: the Rust tokenizer spreads a batch over the CPU cores."""
    enc = tok(list(texts), add_special_tokens=False, return_offsets_mapping=True)
    return list(zip(enc["input_ids"], enc["offset_mapping"], strict=True))


def build_mask(
    sample_id: str,
    rendered: Rendered,
    ids: list[int],
    offsets: list[tuple[int, int]],
    specials: frozenset[int],
    template_tokens: str,
) -> Encoded:
    starts = [o[0] for o in offsets]
    spans: list[tuple[int, int]] = []
    final = (0, 0)
    for turn in rendered.turns:
        first = turn.generated_from if template_tokens == "train" else turn.own_from
        span = _turn_span(turn, first, starts, offsets, ids, specials, rendered.text)
        if span[1] > span[0]:
            spans.append(span)
        final = _turn_span(turn, turn.generated_from, starts, offsets, ids, specials, rendered.text)
    if not spans:
        raise InputError(
            f"{sample_id}: the loss mask is all zero (no assistant token found in the render)",
            kind="empty_mask",
            hint="check that --tokenizer/--chat-template belong to the target model",
        )
    return Encoded(ids, _merge(spans), final, offsets, rendered.text)


def _turn_span(
    turn: TurnChars,
    first_char: int,
    starts: list[int],
    offsets: list[tuple[int, int]],
    ids: list[int],
    specials: frozenset[int],
    text: str,
) -> tuple[int, int]:
    lo = bisect_left(starts, first_char)
    hi = bisect_left(starts, turn.own_to)
    # Walk over whitespace-only tokens to the end-of-turn token; include it if found.
    k = hi
    while k < len(ids) and ids[k] not in specials and not text[slice(*offsets[k])].strip():
        k += 1
    if k < len(ids) and ids[k] in specials:
        hi = k + 1
    return lo, max(lo, hi)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
