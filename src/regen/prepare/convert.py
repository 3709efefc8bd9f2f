"""The base every row goes through, whatever its format: adapter → checks → Prompt.

Adapters only say what the messages are; the rules that hold for every format live here:
the trailing answer is dropped (the file holds prompts), a prompt must end with a user or
tool turn, empty content after dropping non-text blocks is a reject that names the flag,
and every column the adapter did not consume is kept in meta.
"""

from __future__ import annotations

from typing import Any

from regen.chat import is_empty
from regen.errors import InputError
from regen.prepare import category
from regen.prepare.dedup import prompt_hash
from regen.prepare.formats import Adapter, Converted
from regen.prepare.recipe import SourceSpec
from regen.records import Prompt


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
        label = self.spec.category or category.own_label(row, self.spec.category_field)
        meta: dict[str, Any] = {
            "category": category.label_name(label)
            if label
            else category.guess(converted.messages, converted.tools)
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
    if all(is_empty(m["content"]) for m in messages if m["role"] == "user"):
        dropped = sum(converted.dropped.values())
        hint = (
            "its non-text blocks were dropped; pass --keep-multimodal to keep them"
            if dropped
            else "the record's user text is empty"
        )
        raise InputError(
            f"the user turns are empty ({dropped} non-text block(s) dropped)",
            kind="empty_prompt",
            hint=hint,
        )
