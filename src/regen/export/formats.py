"""Output row shapes, one class per trainer target; the runner owns reading, filtering, writing.

Each target writes exactly what its consumer reads, named the way that consumer names it:

    specforge            SpecForge `data.train_data_path`: {"conversations": [{role, content}]}
    specforge-tokenized  SpecForge `data.prompts_path`: JSONL {"input_ids", "loss_mask"}
    speculators          speculators' pre-tokenised rows: JSONL {"input_ids", "loss_mask"}
    sharegpt-llamafactory  LLaMA-Factory's ShareGPT (`sharegpt` too): {"conversations": [{from,
                         value}]} with function_call / observation turns
    sharegpt-axolotl     axolotl's chat_template reader: from/value, OpenAI tool_calls
    tokenized            `datasets`: Parquet {input_ids, loss_mask, attention_mask, ...}
    openai-batch         an OpenAI batch output file: {custom_id, response, error}

The system-prompt rule: rows carry exactly the messages the target was sent, so a system
message appears only where the prompt had one. Tokenised targets are rendered by the target's
own template, as at generation time; for conversation targets the trainer renders, and must
not add a default system prompt of its own (see `Format.how_to_train`).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from regen.errors import ConfigError
from regen.export.format_base import REASONING_MODES, Format, inline_reasoning, named
from regen.export.openai_batch import OpenAIBatch
from regen.export.sharegpt import ShareGPTAxolotl, ShareGPTLlamaFactory
from regen.finished.mask import Encoded
from regen.finished.record import Completion


class SpecForge(Format):
    """`{"id", "conversations": [{"role", "content", "tool_calls"?}], "tools"?}`.

    SpecForge's parser keeps only role, content and tool_calls of each message, so reasoning
    goes inline as `<think>...</think>` (the default); a reasoning_content field is dropped.
    """

    name = "specforge"
    per_domain = False  # SpecForge opens one file
    snippet = (
        "# SpecForge has no plugin hook: add this to specforge/data/template.py (a ChatML\n"
        "# target; adapt the headers to yours), then set chat_template: regen-chatml\n"
        'TEMPLATE_REGISTRY.register("regen-chatml", ChatTemplate(\n'
        '    assistant_header="<|im_start|>assistant\\n", user_header="<|im_start|>user\\n",\n'
        '    system_prompt=None, end_of_turn_token="<|im_end|>"))'
    )
    last_turn_only = "train with data.train_only_last_turn: true (SpecForge trains them all)"
    how_to_train = (
        "SpecForge (raw conversations): data.train_data_path="
        "OUT/data/default/train-00000-of-00001.jsonl with a chat "
        "template whose system_prompt is None (register one: the built-in `qwen` adds "
        '"You are a helpful assistant." to rows without a system message, and supervises the '
        "newline after <|im_end|>). For exactly regen's masks use --format specforge-tokenized."
    )
    several_files = (
        "SpecForge opens one file per run: the train split is {n} files (--max-file-mb), so "
        "train on each in turn, each run starting from the last one's draft "
        "(model.draft_checkpoint_path)."
    )

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        row: dict[str, Any] = {
            **named(completion),
            "conversations": [self._message(m) for m in completion.messages],
        }
        if completion.tools:
            row["tools"] = completion.tools
        return row

    def render_differs(self, row: dict[str, Any], enc: Encoded, tok: Any) -> str | None:
        """Why SpecForge's render of this row (the target's template over role, content and
        tool_calls, as its parser does) differs from regen's (--format specforge-tokenized),
        or None when the two give the same tokens."""
        keep = ("role", "content", "tool_calls")
        messages = [{k: m[k] for k in keep if k in m} for m in row["conversations"]]
        try:
            text = tok.apply_chat_template(messages, tools=row.get("tools"), tokenize=False)
        except Exception as exc:  # jinja2 raises many types; the row is named, not dropped
            return f"the template cannot render the row as SpecForge passes it ({exc})"
        if text == enc.text:
            return None
        has_reasoning = any(m.get("reasoning_content") for m in row["conversations"]) or any(
            "<think>" in (m.get("content") or "") for m in messages
        )
        if has_reasoning:
            return (
                "reasoning: the template renders it from reasoning_content, and SpecForge "
                "passes it inline in content (try --reasoning field with a template that "
                "reads it, or train on --format specforge-tokenized)"
            )
        return "the template renders these messages differently without regen's fields"

    def _message(self, m: dict) -> dict[str, Any]:
        content, reasoning = inline_reasoning(m, self.reasoning)
        out: dict[str, Any] = {"role": m["role"], "content": content}
        if reasoning is not None:
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
    how_to_train = (
        'datasets.load_dataset("OUT") gives SPLITS with input_ids, loss_mask '
        "and attention_mask, rendered with the target's own template."
    )

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        assert enc is not None  # the runner encodes whenever needs_tokenizer is set
        return {
            **named(completion),
            "input_ids": enc.input_ids,
            "loss_mask": enc.loss_mask(),
            "attention_mask": enc.attention_mask(),
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
    several_files = (
        "SpecForge opens one file per run: the train split is {n} files (--max-file-mb), so "
        "train on each in turn, each run starting from the last one's draft "
        "(model.draft_checkpoint_path)."
    )

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        assert enc is not None
        return {**named(completion), "input_ids": enc.input_ids, "loss_mask": enc.loss_mask()}

    trainer = "SpecForge's DFlash-family training (dflash, domino, dspark)"

    def problem(self, row: dict[str, Any]) -> str | None:
        """SpecForge's DFlash-family providers filter rows by `loss_mask_filter`
        (specforge/data/loss_mask.py: has_consecutive_supervised_tokens)."""
        mask = row["loss_mask"]
        if any(a and b for a, b in pairwise(mask)):
            return None
        return "no two supervised tokens in a row (a block of the drafter needs them)"


class Speculators(SpecForgeTokenized):
    """speculators' "speculator-format" rows (`input_ids` + `loss_mask`) pass straight
    through its preprocessing, with no vLLM /render endpoint."""

    name = "speculators"
    per_domain = True
    trainer = ""
    several_files = ""  # its glob reads every file
    how_to_train = (
        "speculators: pass 'OUT/data/*/train-*.jsonl' (a glob of the train files: a directory "
        "would also load the validation files) as the training data; rows carrying input_ids "
        "and loss_mask skip rendering, so no --render-endpoint is needed."
    )

    def problem(self, row: dict[str, Any]) -> str | None:
        return None  # speculators trains any row with a supervised token


FORMATS: dict[str, type[Format]] = {
    f.name: f
    for f in (
        SpecForge,
        SpecForgeTokenized,
        Speculators,
        ShareGPTLlamaFactory,
        ShareGPTAxolotl,
        Tokenized,
        OpenAIBatch,
    )
}
FORMATS["sharegpt"] = ShareGPTLlamaFactory  # the name before the two layouts
__all__ = ["FORMATS", "REASONING_MODES", "Format", "inline_reasoning", "make_format"]


def make_format(name: str, reasoning: str = "inline", supervise: str = "regenerated") -> Format:
    if name not in FORMATS:
        raise ConfigError(f"unknown --format {name}", hint=f"use one of {', '.join(FORMATS)}")
    return FORMATS[name](reasoning, supervise)
