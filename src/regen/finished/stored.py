"""Token ids and loss mask from the ids the engine stored (`generate --return-token-ids`).

A run with stored ids already holds the sample's tokens: the prompt as the engine tokenised
its render (generation prompt included) and the answer as the engine generated it. When the
final turn is the only supervised one and the mask starts at the generation prompt's end
(`--template-tokens train`), those ids cover the sample but for what the template appends
after the turn's text (`<|im_end|>\\n` in ChatML), which is the same for every sample of a
thinking mode and is tokenised once. So the sample is

    input_ids = prompt ids + answer ids (less a trailing stop token) + the template's tail
    loss mask = 0 over the prompt, 1 over the answer and the tail through its end-of-turn token

with no render and no tokeniser call. An answer cut at the cap has no tail: the sample ends
with its last drawn token, as the rendered one does (finished/mask.py). Whether that equals
what the template renders is what `regen check` asks of every sample that has stored ids
(the token_mismatch rule): it builds both and names the samples where they differ (a
template that trims the answer, an engine that tokenised differently).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from regen.errors import InputError
from regen.finished.mask import Encoded
from regen.finished.record import Completion, Ids, is_ids, same_ids
from regen.finished.render import PROBE, template_kwargs


@dataclass(frozen=True)
class Tail:
    """What the template writes after a final assistant turn's text, as tokens."""

    ids: tuple[int, ...]
    supervised: int  # leading tokens the mask trains: whitespace through the end-of-turn token
    closed: bool  # whether it has that end-of-turn (special) token


def template_tail(tok: Any, specials: frozenset[int], completion: Completion) -> Tail | None:
    """The tail for this sample's thinking mode, from a probe conversation (None when the
    template cannot render the probe: the sample is then re-tokenised)."""
    messages = [{"role": "user", "content": "?"}, {"role": "assistant", "content": PROBE}]
    try:
        text = tok.apply_chat_template(messages, tokenize=False, **template_kwargs(completion))
    except Exception:  # jinja2 raises many types; such a template is re-tokenised per sample
        return None
    if PROBE not in text:
        return None
    tail = text[text.rindex(PROBE) + len(PROBE) :]
    enc = tok(tail, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    k = 0  # as mask.py walks a turn's end: whitespace tokens, then the special one
    while k < len(ids) and ids[k] not in specials and not tail[slice(*offsets[k])].strip():
        k += 1
    closed = k < len(ids) and ids[k] in specials
    return Tail(tuple(ids), k + 1 if closed else 0, closed)


def covered(completion: Completion, template_tokens: str, supervise: str) -> bool:
    """Do the stored ids cover this sample exactly: ids of a non-empty prompt and of the
    answer, the final turn the only one trained, and the mask from the generation prompt?"""
    ids = completion.raw.get("token_ids")
    if template_tokens != "train" or not isinstance(ids, dict):
        return False
    prompt = ids.get("prompt")
    if not is_ids(prompt) or not len(prompt) or not is_ids(ids.get("completion")):
        return False
    assistant = [i for i, m in enumerate(completion.messages) if m.get("role") == "assistant"]
    trained = assistant if supervise == "all" else completion.regenerated
    return len(trained) == 1


def from_stored_ids(
    completion: Completion, tail: Tail, specials: frozenset[int], flags: tuple[str, ...] = ()
) -> Encoded:
    """The sample's tokens and mask from its stored ids (call when `covered`). `flags`: the
    template checks known without a render (the generation prompt's)."""
    stored = completion.raw["token_ids"]
    prompt, answer = stored["prompt"], stored["completion"]
    cut = completion.is_cut  # ends where the model stopped: no tail (finished/render.py)
    if len(answer) and answer[-1] in specials and not cut:
        answer = answer[:-1]  # the stop token, stored by some engines: the tail has its own
    if cut:
        tail = Tail((), 0, True)
    start = len(prompt)
    end = start + len(answer) + tail.supervised
    if end == start:
        raise InputError(
            f"{completion.label}: the loss mask is all zero (no answer token stored)",
            kind="empty_mask",
            hint="check that --tokenizer/--chat-template belong to the target model",
        )
    written = completion.regenerated
    source_turns = sum(
        m.get("role") == "assistant" and i not in written for i, m in enumerate(completion.messages)
    )
    unterminated = 0 if tail.closed else 1
    return Encoded(
        _joined(prompt, answer, tail.ids),
        [(start, end)],
        final_generated=(start, end),
        offsets=[],
        text="",
        final_own=(start, start + len(answer)),
        unterminated=unterminated,
        flags=flags + (("unterminated_turn",) if unterminated else ()),
        source_turns=source_turns,
        stored=True,
    )


def _joined(prompt: Ids, answer: Ids, tail: tuple[int, ...]) -> Ids:
    """The sample's ids in the kind they were stored in: arrays stay arrays, lists lists."""
    if isinstance(prompt, np.ndarray) or isinstance(answer, np.ndarray):
        return np.concatenate([prompt, answer, np.array(tail, dtype=np.int64)])
    return [*prompt, *answer, *tail]


def agrees(stored: Encoded, retokenised: Encoded) -> bool:
    """The guard: the same token ids and the same trained positions."""
    return same_ids(stored.input_ids, retokenised.input_ids) and stored.spans == retokenised.spans
