"""The base every row goes through, whatever its format: adapter → checks → Prompt.

Adapters only say what the messages are; the rules that hold for every format live here:
the trailing answer is dropped (the file holds prompts), a prompt must end with a user or
tool turn, empty content after dropping non-text blocks is a reject that names the flag,
tool calls and their results stay paired (a result without an id takes the next open
call's; what cannot be paired is a reject with its reason), and every column the adapter
did not consume is kept in meta.
"""

from __future__ import annotations

from typing import Any

from regen.chat import asks_nothing, no_user_text
from regen.errors import InputError
from regen.prepare.category import guess, label_name, own_label
from regen.prepare.dedup import prompt_hash
from regen.prepare.formats import Adapter, Converted
from regen.prepare.recipe import SourceSpec
from regen.prepare.tools import link_tool_results
from regen.records import Prompt
from regen.tool_trace import BAD_ARGUMENTS, ORPHAN_RESULT, UNANSWERED_CALL, trace_faults

TRACE_FAULTS = {  # what each broken pairing means in a prompt, and what to do about it
    ORPHAN_RESULT: "a tool result answers no call of the assistant turn before it",
    UNANSWERED_CALL: "a tool call has no result before the conversation goes on",
    BAD_ARGUMENTS: "a tool call's arguments are not JSON",
}


class Converter:
    def __init__(self, spec: SourceSpec, adapter: Adapter) -> None:
        self.spec = spec
        self.adapter = adapter

    def convert(self, row: dict, index: int) -> tuple[Prompt, bytes, Converted]:
        """The prompt, its 16-byte hash, and the adapter's answer (for the dropped counts)."""
        converted, digest = self.parse(row)
        return self.prompt(row, index, converted, digest), digest, converted

    def parse(self, row: dict) -> tuple[Converted, bytes]:
        """The checked messages and their 16-byte hash: all that dedup and ranking need."""
        converted = self.adapter.convert(row)
        messages = converted.messages
        while messages and messages[-1]["role"] == "assistant":
            messages.pop()
        check(messages, converted)
        keep_trace_whole(messages)
        return converted, prompt_hash(messages, converted.tools)

    def prompt(self, row: dict, index: int, converted: Converted, digest: bytes) -> Prompt:
        """The full record, category and meta included (built only for prompts the blend may
        keep: the category heuristic is the costliest step per row)."""
        return Prompt(
            id=digest.hex(),
            messages=converted.messages,
            tools=converted.tools,
            source={
                "name": self.spec.name,  # the recipe's name: what reports call it
                "dataset": self.spec.dataset,
                "config": self.spec.config,
                "split": self.spec.split if self.spec.hf else None,
                "row": index,
            },
            meta=self.meta(row, converted),
        )

    def meta(self, row: dict, converted: Converted) -> dict[str, Any]:
        label = self.spec.category or own_label(row, self.spec.category_field)
        meta: dict[str, Any] = {
            "category": label_name(label) if label else guess(converted.messages, converted.tools)
        }
        for key, value in row.items():
            if key not in converted.used and value is not None and key != "category":
                meta[key] = value
        if converted.dropped:
            meta["dropped_blocks"] = dict(sorted(converted.dropped.items()))
        return meta


def check(messages: list[dict], converted: Converted) -> None:
    if not messages:
        raise InputError(
            "nothing left after dropping the trailing assistant answer",
            kind="no_prompt",
            hint="the record needs a user turn",
        )
    if messages[-1]["role"] not in ("user", "tool"):
        raise InputError(
            f"the prompt ends with a {messages[-1]['role']} turn, not user/tool",
            kind="no_user_turn",
            hint="the record needs a user turn to answer",
        )
    every, last = no_user_text(messages), asks_nothing(messages)
    if every or last:
        dropped = sum(converted.dropped.values())
        hint = (
            "its non-text blocks were dropped; pass --keep-multimodal to keep them"
            if dropped
            else "the record's user text is empty"
            if every
            else "give that turn its text, or end the conversation at the turn before it"
        )
        what = "the user turns are" if every else "the last user turn, the one to answer, is"
        raise InputError(
            f"{what} empty ({dropped} non-text block(s) dropped)",
            kind="empty_prompt",
            hint=hint,
        )


def keep_trace_whole(messages: list[dict]) -> None:
    """Every tool result answers a call of the assistant turn before it, every call has its
    result before the conversation goes on, and every call's arguments are JSON: a target
    regenerating the trace is never asked from a history no agent could have lived."""
    link_tool_results(messages)  # a source without result ids: paired in call order
    faults = trace_faults(messages, open_at_end=False)
    if faults:
        raise InputError(
            f"broken tool trace: {TRACE_FAULTS[faults[0]]}",
            kind=faults[0],
            hint="fix the record's tool_call_id / tool_calls, or leave the source out",
        )
