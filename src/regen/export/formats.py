"""Output row shapes, one class per trainer target; the runner owns reading, filtering, writing.

Each target writes exactly what its consumer reads, named the way that consumer names it:

    specforge            SpecForge `data.train_data_path`: {"conversations": [{role, content}]}
    specforge-tokenized  SpecForge `data.prompts_path`: JSONL {"input_ids", "loss_mask"}
    speculators          speculators' pre-tokenised rows: JSONL {"input_ids", "loss_mask"}
    sharegpt             axolotl / LLaMA-Factory ShareGPT: {"conversations": [{from, value}]}
    tokenized            `datasets`: Parquet {input_ids, loss_mask, attention_mask, ...}

The system-prompt rule: rows carry exactly the messages the target was sent, so a system
message appears only where the prompt had one. Tokenised targets are rendered by the target's
own template, as at generation time; for conversation targets the trainer renders, and must
not add a default system prompt of its own (see `Format.how_to_train`).
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any, ClassVar

import orjson

from regen.check.mask import Encoded
from regen.check.record import Completion
from regen.errors import ConfigError

REASONING_MODES = ("inline", "field", "drop")


def inline_reasoning(m: dict, mode: str) -> tuple[str, str | None]:
    """(content, reasoning kept apart or None), with reasoning placed per `mode`."""
    content = m.get("content") or ""
    reasoning = (m.get("reasoning_content") or "").strip()
    if m.get("role") != "assistant" or not reasoning or mode == "drop":
        return content, None
    if mode == "inline":
        return f"<think>\n{reasoning}\n</think>\n\n{content}", None
    return content, reasoning


class Format:
    name: ClassVar[str]
    needs_tokenizer: ClassVar[bool] = False
    file_types: ClassVar[tuple[str, ...]] = ("jsonl",)
    reads_reasoning_field: ClassVar[bool] = False  # does the consumer read reasoning_content?
    per_domain: ClassVar[bool] = True  # one config (folder) per domain; False: one file a split
    how_to_train: ClassVar[str] = ""
    # what to set when rows hold assistant turns the target did not write (conversation targets)
    last_turn_only: ClassVar[str] = ""

    def __init__(self, reasoning: str = "inline", supervise: str = "regenerated") -> None:
        if reasoning not in REASONING_MODES:
            raise ConfigError(f"--reasoning must be one of {', '.join(REASONING_MODES)}")
        self.reasoning, self.supervise = reasoning, supervise

    def supervision_warning(self, rows_with_source_turns: int) -> str | None:
        """Conversation targets: the trainer renders and masks; say how to train only the
        turns the target wrote (tokenised targets carry regen's own mask)."""
        if self.needs_tokenizer or not rows_with_source_turns or self.supervise == "all":
            return None
        return (
            f"{rows_with_source_turns} rows hold earlier assistant turns that the source dataset "
            f"wrote, not the target: {self.last_turn_only}"
        )

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        raise NotImplementedError

    def reasoning_warning(self, samples_with_reasoning: int) -> str | None:
        """Say so when this target would lose the reasoning some samples carry."""
        if not samples_with_reasoning or self.needs_tokenizer:
            return None  # tokenised targets hold what the template renders (check judges it)
        if self.reasoning == "drop":
            return f"{samples_with_reasoning} samples carry reasoning; --reasoning drop left it out"
        if self.reasoning == "field" and not self.reads_reasoning_field:
            return (
                f"{samples_with_reasoning} samples carry reasoning in reasoning_content, which "
                f"{self.name}'s reader ignores: use --reasoning inline to keep it"
            )
        return None


class SpecForge(Format):
    """`{"id", "conversations": [{"role", "content", "tool_calls"?}], "tools"?}`.

    SpecForge's parser keeps only role, content and tool_calls of each message, so reasoning
    goes inline as `<think>...</think>` (the default); a reasoning_content field is dropped.
    """

    name = "specforge"
    per_domain = False  # SpecForge opens one file
    last_turn_only = "train with data.train_only_last_turn: true (SpecForge trains them all)"
    how_to_train = (
        "SpecForge (raw conversations): data.train_data_path="
        "OUT/data/default/train-00000-of-00001.jsonl with a chat "
        "template whose system_prompt is None (register one: the built-in `qwen` adds "
        '"You are a helpful assistant." to rows without a system message, and supervises the '
        "newline after <|im_end|>). For exactly regen's masks use --format specforge-tokenized."
    )

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        row: dict[str, Any] = {
            "id": completion.id,
            "conversations": [self._message(m) for m in completion.messages],
        }
        if completion.tools:
            row["tools"] = completion.tools
        return row

    def _message(self, m: dict) -> dict[str, Any]:
        content, reasoning = inline_reasoning(m, self.reasoning)
        out: dict[str, Any] = {"role": m["role"], "content": content}
        if reasoning is not None:
            out["reasoning_content"] = reasoning
        for key in ("tool_calls", "tool_call_id", "name"):
            if m.get(key):
                out[key] = m[key]
        return out


SHAREGPT_ROLES = {"system": "system", "user": "human", "assistant": "gpt", "tool": "observation"}


class ShareGPT(Format):
    """ShareGPT as axolotl and LLaMA-Factory define it: `{"conversations": [{"from", "value"}]}`
    with from = system / human / gpt / function_call / observation, and `tools` as a JSON
    string (LLaMA-Factory's `tools` column). A tool call is a `function_call` turn whose value
    is `{"name", "arguments"}` as JSON, as LLaMA-Factory's converter reads it."""

    name = "sharegpt"
    how_to_train = (
        "axolotl: datasets: [{path: OUT, type: chat_template, field_messages: conversations, "
        "message_property_mappings: {role: from, content: value}}]. LLaMA-Factory: "
        'dataset_info.json {"NAME": {"file_name": "OUT/train.jsonl", "formatting": "sharegpt", '
        '"columns": {"messages": "conversations", "tools": "tools"}}}.'
    )

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        turns: list[dict[str, str]] = []
        for m in completion.messages:
            content, _ = inline_reasoning(m, "drop" if self.reasoning == "drop" else "inline")
            if content or not m.get("tool_calls"):
                turns.append({"from": SHAREGPT_ROLES.get(m["role"], m["role"]), "value": content})
            for call in m.get("tool_calls") or []:
                fn = call.get("function") or {}
                args = fn.get("arguments")
                if isinstance(args, str):
                    # invalid JSON is kept as written; `regen check` flags it (bad_tool_call)
                    with suppress(orjson.JSONDecodeError):
                        args = orjson.loads(args)
                value = orjson.dumps({"name": fn.get("name"), "arguments": args}).decode()
                turns.append({"from": "function_call", "value": value})
        row: dict[str, Any] = {"id": completion.id, "conversations": turns}
        if completion.tools:
            row["tools"] = orjson.dumps(completion.tools).decode()
        return row


class Tokenized(Format):
    """`input_ids`, `loss_mask`, `attention_mask`, built by the same Encoder as `regen check`."""

    name = "tokenized"
    needs_tokenizer = True
    file_types = ("parquet", "jsonl")
    how_to_train = (
        'datasets.load_dataset("OUT") gives train (and validation) with input_ids, loss_mask '
        "and attention_mask, rendered with the target's own template."
    )

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


class SpecForgeTokenized(Format):
    """JSON lines with `input_ids` and `loss_mask`: SpecForge's pre-tokenised prompt path
    (it reads JSON lines, not Parquet). The masks are regen's, so no SpecForge template is
    involved: no default system prompt, no supervised newline after the end-of-turn."""

    name = "specforge-tokenized"
    needs_tokenizer = True
    per_domain = False  # SpecForge opens one file
    how_to_train = (
        "SpecForge (pre-tokenised): data.prompts_path=OUT/data/default/train-00000-of-00001.jsonl;"
        " the rows carry "
        "input_ids and loss_mask, so no chat template is applied."
    )

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        assert enc is not None
        return {"id": completion.id, "input_ids": enc.input_ids, "loss_mask": enc.loss_mask()}


class Speculators(SpecForgeTokenized):
    """speculators' "speculator-format" rows (`input_ids` + `loss_mask`) pass straight
    through its preprocessing, with no vLLM /render endpoint."""

    name = "speculators"
    per_domain = True
    how_to_train = (
        "speculators: pass 'OUT/data/*/train-*.jsonl' (a glob of the train files: a directory "
        "would also load the validation files) as the training data; rows carrying input_ids "
        "and loss_mask skip rendering, so no --render-endpoint is needed."
    )


FORMATS: dict[str, type[Format]] = {
    f.name: f for f in (SpecForge, SpecForgeTokenized, Speculators, ShareGPT, Tokenized)
}


def make_format(name: str, reasoning: str = "inline", supervise: str = "regenerated") -> Format:
    if name not in FORMATS:
        raise ConfigError(f"unknown --format {name}", hint=f"use one of {', '.join(FORMATS)}")
    return FORMATS[name](reasoning, supervise)
