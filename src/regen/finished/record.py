"""A read-only view of one completion line, with the facts check and export ask about."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from regen.errors import InputError
from regen.records import NO_SOURCE, source_name

CUT = "length"  # the finish_reason of an answer cut at --max-output-tokens
SampleKey = tuple[str, int]  # (prompt id as given, sample number): what names one sample
# stored token ids: a list as JSON gives them, or an int64 array where the line was read
# for a Parquet export (id_arrays.py)
Ids = list[int] | np.ndarray


def is_ids(value: Any) -> bool:
    return isinstance(value, list | np.ndarray)


def same_ids(a: Ids, b: Ids) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return len(a) == len(b) and bool((np.asarray(a) == np.asarray(b)).all())
    return a == b


def sample_label(prompt_id: Any, sample: Any) -> str:
    """How reports name a sample to a person: the id as given, the sample number apart."""
    return f"{prompt_id} (sample {int(sample or 0)})"


def key_of(row: dict[str, Any]) -> SampleKey:
    """The (id, sample) a written row names: its `id` and `sample` fields. Exports and score
    rows written before the two were separate carry one `"id": "ID#SAMPLE"` and no `sample`;
    those are read too, so a merge or a resumed score can build on them."""
    row_id, sample = str(row.get("id")), row.get("sample")
    if sample is not None:
        return row_id, int(sample)
    prompt_id, mark, number = row_id.rpartition("#")
    if mark and number.isdigit():
        return prompt_id, int(number)
    return row_id, 0


@dataclass(frozen=True)
class Completion:
    raw: dict

    @classmethod
    def of(cls, raw: Any) -> Completion:
        if not isinstance(raw, dict):
            raise InputError("a completion line must be a JSON object", kind="bad_type")
        messages = raw.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InputError(f"{raw.get('id')!r}: no messages", kind="bad_messages")
        if not any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages):
            raise InputError(f"{raw.get('id')!r}: no assistant turn", kind="no_assistant")
        return cls(raw)

    @property
    def id(self) -> str:
        """The prompt's id exactly as the prompt file gave it."""
        return str(self.raw.get("id"))

    @property
    def sample(self) -> int:
        """Which sample of its prompt this is (0 unless --samples-per-prompt asked for more)."""
        return int(self.raw.get("sample") or 0)

    @property
    def key(self) -> SampleKey:
        return self.id, self.sample

    @property
    def label(self) -> str:
        return sample_label(self.id, self.sample)

    @property
    def messages(self) -> list[dict]:
        return self.raw["messages"]

    @property
    def tools(self) -> list | None:
        return self.raw.get("tools") or None

    @cached_property  # asked a dozen times a row by the checks; the record is read-only
    def final(self) -> dict:
        """The last assistant message: the one this line's generation produced."""
        return next(m for m in reversed(self.messages) if m.get("role") == "assistant")

    @cached_property
    def regenerated(self) -> frozenset[int]:
        """Indices of the assistant messages the target wrote. A run regenerates the last
        assistant turn, or (`--regenerate-turns all`) every one, and records each request in
        `meta.turns` when there was more than one; the other assistant turns came from the
        source dataset (another model, a person)."""
        assistant = [i for i, m in enumerate(self.messages) if m.get("role") == "assistant"]
        turns = (self.raw.get("meta") or {}).get("turns")
        count = len(turns) if isinstance(turns, list) and turns else 1
        return frozenset(assistant[-count:])

    @cached_property
    def cut(self) -> frozenset[int]:
        """Indices of the assistant messages the target wrote that were cut at the answer cap
        (`finish_reason: length`): the model never drew their end-of-turn, so no verb may
        supervise one or count it as a miss (finished/render.py ends such a turn where the
        model stopped). Each request's finish_reason is in `meta.turns` when the row took
        several; else the row's own is its final turn's."""
        turns = (self.raw.get("meta") or {}).get("turns")
        written = sorted(self.regenerated)
        if isinstance(turns, list) and len(turns) == len(written):
            reasons = [t.get("finish_reason") if isinstance(t, dict) else None for t in turns]
            return frozenset(i for i, why in zip(written, reasons, strict=True) if why == CUT)
        return frozenset(written[-1:]) if self.finish_reason == CUT else frozenset()

    @property
    def is_cut(self) -> bool:
        """The final answer (the last assistant turn) was cut at the cap."""
        return max(self.regenerated) in self.cut

    @property
    def answer(self) -> str:
        return self.final.get("content") or ""

    @cached_property
    def answer_words(self) -> str:
        """The answer with its whitespace runs as single spaces (asked by several checks)."""
        return " ".join(self.answer.split())

    @property
    def reasoning(self) -> str:
        return self.final.get("reasoning_content") or ""

    @property
    def has_tool_calls(self) -> bool:
        return bool(self.final.get("tool_calls"))

    @property
    def thinking(self) -> str:
        """The thinking mode the run asked the server for: on, off, or auto (also when unknown)."""
        sampling = (self.raw.get("meta") or {}).get("sampling") or {}
        return sampling.get("thinking") or "auto"

    @property
    def finish_reason(self) -> str:
        return self.raw.get("finish_reason") or "unknown"

    @property
    def source(self) -> str:
        return source_name(self.raw.get("source"))

    @property
    def category(self) -> str:
        return str(self.raw.get("category") or NO_SOURCE)

    @property
    def final_answer_tokens(self) -> int | None:
        """The final answer's length as the engine counted it, the figure its max_tokens cap
        bounds: its stored ids, else the last request's usage (`meta.turns`, when the row
        took several), else the row's; None where the row does not say."""
        ids = self.completion_ids
        if ids is not None:
            return len(ids)
        turns = (self.raw.get("meta") or {}).get("turns")
        usage = turns[-1].get("usage") if isinstance(turns, list) and turns else None
        usage = usage if isinstance(usage, dict) else self.raw.get("usage")
        tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
        return tokens if isinstance(tokens, int) and tokens >= 0 else None

    @property
    def completion_ids(self) -> Ids | None:
        ids = self.raw.get("token_ids")
        if isinstance(ids, dict) and is_ids(ids.get("completion")):
            return ids["completion"]
        return None
