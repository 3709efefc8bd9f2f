"""The tokens a row is scored on: the target's own ids when the run stored them, else the
conversation tokenised with the target's tokenizer and chat template exactly as `check` does.

Re-tokenised text can differ from what the model produced (a different merge of the same
characters), so every row says which it is and the report counts them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from regen.errors import InputError
from regen.finished.encode import Encoder
from regen.finished.record import Completion, sample_label
from regen.score.sampled import GREEDY_DEFAULT, DrawnAt, drawn_at

if TYPE_CHECKING:
    from regen.score.outcome import Outcome


TEACHER_FORCED = "teacher-forced"  # the target's logprobs came from score's own pass of it


@dataclass(frozen=True)
class TokenRow:
    """One row to score: `ids` is prompt + answer, the answer being ids[start:]."""

    id: str  # the prompt's id as given
    sample: int
    ids: list[int]
    start: int
    groups: dict[str, str]
    retokenized: bool
    drawn: DrawnAt = GREEDY_DEFAULT
    logprobs: list[float] | None = None  # the target's, one per answer token (--logprobs)
    target_probs: str | None = None  # TEACHER_FORCED: `logprobs` are the target's own pass's
    engine_tokens: int | None = None  # the answer's length as the engine counted it (usage)

    @property
    def label(self) -> str:
        return sample_label(self.id, self.sample)

    @property
    def answer_tokens(self) -> int:
        return len(self.ids) - self.start

    @property
    def length_differs(self) -> bool:
        """A re-tokenised answer with another length than the engine counted: its text
        tokenises into other tokens than the model drew. An ended answer's end-of-turn is
        counted by some engines (vLLM) and not by others (llama.cpp), so one either way is
        the same length; a cut answer has none (finished/render.py)."""
        if not self.retokenized or self.engine_tokens is None:
            return False
        return self.engine_tokens not in (self.answer_tokens, self.answer_tokens - 1)


# a draft hands each row's outcome (outcome.py) to this, or why the row cannot be scored
Sink = Callable[[TokenRow, "Outcome | InputError"], None]


def token_row(
    completion: Completion, encoder: Encoder, groups: dict[str, str], *, reads_logprobs: bool = True
) -> TokenRow:
    """Raises InputError when the row cannot be tokenised (the template cannot render it) or
    its logprobs do not match its answer tokens, for a draft that `reads_logprobs` (one that
    proposes a single token, the n-gram or a served argmax, reads none: its row is scored
    on its tokens whatever its logprobs)."""
    row = replace(
        _ids_row(completion, encoder, groups), engine_tokens=completion.final_answer_tokens
    )
    logprobs = completion.raw.get("logprobs")
    if logprobs is not None and row.retokenized and len(logprobs) == row.answer_tokens - 1:
        # the render closes the turn with the template's end-of-turn token, which the engine
        # gave no logprob for (never generated, or a stop token it does not report)
        row = replace(row, ids=row.ids[:-1])
    if logprobs is not None and len(logprobs) != row.answer_tokens:
        if not reads_logprobs:
            return replace(row, drawn=drawn_at(completion.raw))
        raise InputError(
            f"{completion.label}: {len(logprobs)} logprobs for {row.answer_tokens} answer tokens"
            + (" (re-tokenised: generate with --return-token-ids)" if row.retokenized else ""),
            kind="logprobs_mismatch",
        )
    return replace(row, drawn=drawn_at(completion.raw), logprobs=logprobs)


def _ids_row(completion: Completion, encoder: Encoder, groups: dict[str, str]) -> TokenRow:
    stored = _stored(completion)
    if stored is not None and stored[0] is not None:
        prompt, answer = stored
        return TokenRow(*completion.key, [*prompt, *answer], len(prompt), groups, False)
    enc = encoder.encode(completion)
    start, end = enc.final_generated
    if end <= start or start == 0:
        raise InputError(f"{completion.label}: no answer tokens in the render", kind="empty_answer")
    if stored is not None:  # answer ids without prompt ids: the prompt is rendered
        return TokenRow(*completion.key, [*enc.input_ids[:start], *stored[1]], start, groups, False)
    return TokenRow(*completion.key, list(enc.input_ids[:end]), start, groups, True)


def _stored(completion: Completion) -> tuple[list[int] | None, list[int]] | None:
    answer = completion.completion_ids
    if not answer:
        return None
    prompt = (completion.raw.get("token_ids") or {}).get("prompt")
    return (prompt if isinstance(prompt, list) and prompt else None), answer
