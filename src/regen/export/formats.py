"""Output row shapes, one class per format; the runner owns reading, filtering and writing."""

from __future__ import annotations

from typing import Any, ClassVar

from regen.check.mask import Encoded
from regen.check.record import Completion
from regen.errors import ConfigError

REASONING_MODES = ("inline", "field", "drop")


class Format:
    name: ClassVar[str]
    needs_tokenizer: ClassVar[bool] = False
    file_types: ClassVar[tuple[str, ...]] = ("jsonl",)

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        raise NotImplementedError


class Conversations(Format):
    """`{"id", "conversations": [{"role", "content"}, ...]}` as SpecForge's trainer reads it.

    Reasoning is put inline as `<think>...</think>` before the answer (what a Qwen3-style
    template expects back), kept in `reasoning_content`, or dropped.
    """

    name = "sharegpt"

    def __init__(self, reasoning: str = "inline") -> None:
        if reasoning not in REASONING_MODES:
            raise ConfigError(f"--reasoning must be one of {', '.join(REASONING_MODES)}")
        self.reasoning = reasoning

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        row: dict[str, Any] = {
            "id": completion.id,
            "conversations": [self._message(m) for m in completion.messages],
        }
        if completion.tools:
            row["tools"] = completion.tools
        return row

    def _message(self, m: dict) -> dict[str, Any]:
        out: dict[str, Any] = {"role": m["role"], "content": m.get("content") or ""}
        reasoning = (m.get("reasoning_content") or "").strip()
        if m["role"] == "assistant" and reasoning and self.reasoning == "inline":
            out["content"] = f"<think>\n{reasoning}\n</think>\n\n{out['content']}"
        elif m["role"] == "assistant" and reasoning and self.reasoning == "field":
            out["reasoning_content"] = reasoning
        for key in ("tool_calls", "tool_call_id", "name"):
            if m.get(key):
                out[key] = m[key]
        return out


class Tokenized(Format):
    """`input_ids`, `loss_mask`, `attention_mask`, built by the same Encoder as `regen check`."""

    name = "tokenized"
    needs_tokenizer = True
    file_types = ("parquet", "jsonl")

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        assert enc is not None  # the runner encodes whenever needs_tokenizer is set
        return {
            "id": completion.id,
            "input_ids": enc.input_ids,
            "loss_mask": enc.loss_mask(),
            "attention_mask": [1] * len(enc.input_ids),
            "source": completion.source,
            "category": completion.category,
        }


def make_format(name: str, reasoning: str) -> Format:
    if name in ("sharegpt", "specforge"):
        return Conversations(reasoning)
    if name == "tokenized":
        return Tokenized()
    raise ConfigError(f"unknown --format {name}", hint="use sharegpt, specforge or tokenized")
