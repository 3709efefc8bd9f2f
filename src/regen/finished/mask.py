"""Tokenise rendered conversations and turn character ranges into a loss mask.

A token is supervised when its first character lies in a supervised range. Each assistant
turn's range is extended over trailing whitespace to the end-of-turn token (a special token
such as `<|im_end|>`), because the drafter must learn to stop. `template_tokens` decides what
happens to text the template inserted before the turn's own text (an empty
`<think></think>` block, a `<think>` opener): "train" supervises it like the model's output
(the server generated everything after the generation prompt), "context" leaves it unmasked.
The generation prompt itself is always context: the model never produced it.

A turn cut at the answer cap (`finish_reason: length`, Completion.cut) ends at the last
token the model drew: its end-of-turn is neither supervised nor, for the final turn, in the
sample at all (the ids stop where the model stopped), whatever the template appends.

`supervise` decides which assistant turns are trained: "regenerated" (the default) only the
turns the target wrote (`Completion.regenerated`); earlier assistant turns that came with the
prompt (written by another model or a person) are context, because a drafter must learn the
target's distribution. "all" trains every assistant turn, and `Encoded.source_supervised`
counts the turns it trains that the target did not write (check's `source_turns_supervised`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from regen.errors import InputError
from regen.finished.record import Ids
from regen.finished.render import Rendered, TurnChars


@dataclass(frozen=True)
class Encoded:
    input_ids: Ids  # a list, or an int64 array where built from stored ids read as arrays
    spans: list[tuple[int, int]]  # supervised token ranges, end-exclusive, sorted, disjoint
    final_generated: tuple[int, int]  # token range the server generated for the final turn
    offsets: list[tuple[int, int]]
    text: str
    final_own: tuple[int, int] = (0, 0)  # token range of the final turn's own text
    unterminated: int = 0  # assistant turns whose supervised span ends on no special token
    flags: tuple[str, ...] = ()  # template checks this sample fails (finished/template.py)
    source_turns: int = 0  # rendered assistant turns the target did not write
    source_supervised: int = 0  # of those, the ones in the mask (only with supervise="all")
    stored: bool = False  # built from the stored ids (finished/stored.py), not tokenised

    @property
    def mask_sum(self) -> int:
        return sum(end - start for start, end in self.spans)

    @property
    def longest_run(self) -> int:
        return max((end - start for start, end in self.spans), default=0)

    def loss_mask(self) -> Ids:
        """1 on the trained positions: a list, or an int64 array where the ids are one."""
        if isinstance(self.input_ids, np.ndarray):
            array = np.zeros(len(self.input_ids), dtype=np.int64)
            for start, end in self.spans:
                array[start:end] = 1
            return array
        mask = [0] * len(self.input_ids)
        for start, end in self.spans:
            mask[start:end] = [1] * (end - start)
        return mask

    def attention_mask(self) -> Ids:
        """1 on every position, in the kind of the ids."""
        if isinstance(self.input_ids, np.ndarray):
            return np.ones(len(self.input_ids), dtype=np.int64)
        return [1] * len(self.input_ids)


def special_ids(tok: Any) -> frozenset[int]:
    """Ids that can close a turn: every special token of the tokenizer."""
    ids = set(tok.all_special_ids)
    ids.update(i for i, t in tok.added_tokens_decoder.items() if t.special)
    return frozenset(ids)


def tokenize_all(tok: Any, texts: Sequence[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """One batched call to the Rust tokenizer (which spreads a batch over the cores unless
    it runs in a worker). Asked directly, not through transformers, whose conversion of the
    answer costs a tenth of the call; the same ids and offsets, and transformers is asked
    when the tokenizer file turns truncation or padding on (transformers turns them off)."""
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None or backend.truncation is not None or backend.padding is not None:
        enc = tok(list(texts), add_special_tokens=False, return_offsets_mapping=True)
        return list(zip(enc["input_ids"], enc["offset_mapping"], strict=True))
    encodings = backend.encode_batch(list(texts), add_special_tokens=False)
    return [(e.ids, TokenOffsets(e)) for e in encodings]


class TokenOffsets(Sequence):
    """A tokenised text's character offsets, asked of the tokenizer's encoding token by token.
    The mask reads a few dozen of a sample's thousands (a binary search per turn boundary);
    turning them all into Python tuples cost more than half of the tokeniser call itself."""

    def __init__(self, encoding: Any) -> None:
        self._encoding, self._count = encoding, len(encoding)

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, k):  # type: ignore[override]  # an int, or a slice as a list
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self._count))]
        if k < 0:
            k += self._count
        if not 0 <= k < self._count:
            raise IndexError(k)
        return self._encoding.token_to_chars(k)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self._encoding.offsets)  # the whole list: one conversion

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __reduce__(self):  # pickled as the plain list it stands for
        return list, (list(self),)


class _Starts:
    """Each token's first character, for a binary search, without building the list."""

    def __init__(self, offsets: Sequence[tuple[int, int]]) -> None:
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, k: int) -> int:
        return self.offsets[k][0]


def build_mask(
    sample_id: str,
    rendered: Rendered,
    ids: list[int],
    offsets: list[tuple[int, int]],
    specials: frozenset[int],
    template_tokens: str,
    written: frozenset[int],
    supervise: str = "regenerated",
) -> Encoded:
    """`written`: message indices of the assistant turns the target wrote."""
    locate = _Locator(ids, offsets, specials, rendered.text)
    spans: list[tuple[int, int]] = []
    unterminated = source_turns = source_supervised = 0
    for turn in rendered.turns:
        by_target = turn.message_index in written
        source_turns += not by_target
        if not by_target and supervise != "all":
            continue  # the source wrote it: context, not a target to learn
        lo, hi, closed = locate.turn(turn, turn.first_supervised(template_tokens))
        if hi > lo:
            spans.append((lo, hi))
            unterminated += not closed
            source_supervised += not by_target
    if not spans:
        raise InputError(
            f"{sample_id}: the loss mask is all zero (no assistant token found in the render)",
            kind="empty_mask",
            hint="check that --tokenizer/--chat-template belong to the target model",
        )
    final, own = (0, 0), (0, 0)
    if rendered.final is not None:
        turn = rendered.final
        final = locate.turn(turn, turn.generated_from)[:2]
        own_to = turn.own_to if turn.cut_at is None else turn.cut_at
        own = (locate.token_at(turn.own_from), locate.token_at(own_to))
        if turn.cut_at is not None:  # the sample ends where the model stopped (render.py)
            ids, offsets = ids[: final[1]], offsets[: final[1]]
    return Encoded(
        ids,
        _merge(spans),
        final_generated=final,
        offsets=offsets,
        text=rendered.text,
        final_own=own,
        unterminated=unterminated,
        source_turns=source_turns,
        source_supervised=source_supervised,
    )


class _Locator:
    """Character positions to token positions, over one tokenised render."""

    def __init__(self, ids: list[int], offsets: list[tuple[int, int]], specials, text: str):
        self.ids, self.offsets, self.specials, self.text = ids, offsets, specials, text
        self.starts = _Starts(offsets)

    def token_at(self, char: int) -> int:
        return bisect_left(self.starts, char)

    def turn(self, turn: TurnChars, first_char: int) -> tuple[int, int, bool]:
        """A turn's tokens from `first_char`: through its end-of-turn token, or, for a turn
        cut at the cap, through the last token the model drew (no end-of-turn is its; it is
        not unterminated either: the model had not finished)."""
        if turn.cut_at is None:
            return self.span(first_char, turn.own_to)
        lo = self.token_at(first_char)
        return lo, max(lo, self.token_at(turn.cut_at)), True

    def span(self, first_char: int, end_char: int) -> tuple[int, int, bool]:
        """Tokens from `first_char` to the turn's end-of-turn token, and whether one was found:
        whitespace-only tokens after the turn's text are walked over to reach it."""
        lo, hi = self.token_at(first_char), self.token_at(end_char)
        ids, k = self.ids, hi
        while k < len(ids) and ids[k] not in self.specials and not self._text(k).strip():
            k += 1
        closed = k < len(ids) and ids[k] in self.specials
        return lo, max(lo, k + 1 if closed else hi), closed

    def _text(self, k: int) -> str:
        return self.text[slice(*self.offsets[k])]


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def is_degenerate(answer_empty: bool, enc: Encoded | None, degenerate_at: int) -> bool:
    """An empty answer, or an empty answer wrapped in template tokens: a mask of at most
    `degenerate_at` tokens of which the model's own text is less than half. A short real
    answer ("4817" with thinking off) is not degenerate."""
    if answer_empty or enc is None:
        return answer_empty
    start, end = enc.final_generated
    own_start, own_end = enc.final_own
    return enc.mask_sum <= degenerate_at and (own_end - own_start) * 2 < end - start
