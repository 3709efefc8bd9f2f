"""Render a conversation with the target's chat template, and find each assistant turn in it.

The loss mask comes from positions, not from a regex over the template: for every assistant
turn we render the conversation a second time with that turn replaced by a probe (one
private-use character as content, no reasoning, no tool calls). The characters where the two
renders differ are the turn's own text, wherever the template put it. (An empty probe would
be ambiguous: an answer starting with "<" shares a character with a following "<|im_end|>".)
The generation prompt (rendering the turns before it with `add_generation_prompt=True`) says
where the model started generating. Renders are string work; we tokenise once per sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from regen.errors import InputError
from regen.finished.record import Completion

TEMPLATE_TOKENS = ("train", "context")


@dataclass(frozen=True)
class TurnChars:
    """Character ranges of one assistant turn in the full render (end-exclusive)."""

    message_index: int
    generated_from: int  # where the model started: after the generation prompt
    own_from: int  # first character that changes with the turn's own text
    own_to: int  # one past the last such character (the end-of-turn token follows)
    # a turn cut at the answer cap (Completion.cut): one past the last character the model
    # drew. Its turn ends there: no end-of-turn token, nor a `</think>` the template closes
    # a cut reasoning block with, is the model's. None for a turn the model ended.
    cut_at: int | None = None

    def first_supervised(self, template_tokens: str) -> int:
        """ "train" starts at the generation prompt's end, "context" at the turn's own text."""
        return self.generated_from if template_tokens == "train" else self.own_from


@dataclass(frozen=True)
class Rendered:
    text: str
    turns: list[TurnChars]
    final_index: int  # message index of the last assistant turn: what this line generated

    @property
    def final(self) -> TurnChars | None:
        """The final turn's characters, or None when the template does not render it."""
        last = self.turns[-1] if self.turns else None
        return last if last is not None and last.message_index == self.final_index else None


def template_kwargs(completion: Completion) -> dict[str, Any]:
    """Render with the thinking switch the run asked the server for (when it asked)."""
    mode = completion.thinking
    return {} if mode == "auto" else {"enable_thinking": mode == "on"}


def generation_prompt(tok: Any, completion: Completion, probe: bool = True) -> str:
    """What the template appends for `add_generation_prompt=True` ("" when it has none).

    With `probe`, one made-up user message stands for any conversation (the answer is a fact
    of the template, cached by the caller); otherwise the completion's own turns are used.
    """
    kwargs = template_kwargs(completion)
    messages, tools = completion.messages, completion.tools
    final = max(i for i, m in enumerate(messages) if m.get("role") == "assistant")
    if probe:
        messages, tools, final = [{"role": "user", "content": PROBE}], None, 1
    plain = _render(
        tok,
        completion,
        messages=messages[:final],
        tools=tools,
        generation_prompt=False,
        kwargs=kwargs,
    )
    prompted = _render(
        tok,
        completion,
        messages=messages[:final],
        tools=tools,
        generation_prompt=True,
        kwargs=kwargs,
    )
    return prompted[len(plain) :] if prompted.startswith(plain) else prompted


def render_turns(tok: Any, completion: Completion) -> Rendered:
    messages, tools = completion.messages, completion.tools
    kwargs = template_kwargs(completion)
    full = _render(
        tok, completion, messages=messages, tools=tools, generation_prompt=False, kwargs=kwargs
    )
    turns = []
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        probed = [*messages[:i], _probe(message), *messages[i + 1 :]]
        own = _diff_region(
            full,
            _render(
                tok,
                completion,
                messages=probed,
                tools=tools,
                generation_prompt=False,
                kwargs=kwargs,
            ),
        )
        if own is None:
            continue  # the template does not render this turn at all: nothing to train on
        own_from, own_to = own
        prompt = _render(
            tok,
            completion,
            messages=messages[:i],
            tools=tools,
            generation_prompt=True,
            kwargs=kwargs,
        )
        # A template that rewrites earlier turns (Qwen3 drops their reasoning once a later user
        # turn exists) is not prefix-stable; the turn then starts at its own text.
        stable = full.startswith(prompt) and len(prompt) <= own_from
        cut_at = drawn_end(full, message, own_from, own_to) if i in completion.cut else None
        turns.append(TurnChars(i, len(prompt) if stable else own_from, own_from, own_to, cut_at))
    final_index = max(i for i, m in enumerate(messages) if m.get("role") == "assistant")
    return Rendered(full, turns, final_index)


def drawn_end(text: str, message: dict, own_from: int, own_to: int) -> int:
    """Where a cut turn's drawn text ends in the render: after its answer, or, cut before it
    wrote one (a thinking model cut inside its reasoning), after the reasoning, before the
    `</think>` the template closes the block with."""
    if (message.get("content") or "").strip() or message.get("tool_calls"):
        return own_to
    reasoning = (message.get("reasoning_content") or "").strip()
    at = text.rfind(reasoning, own_from, own_to) if reasoning else -1
    return at + len(reasoning) if at >= 0 else own_to


PROBE = "\ue000"  # private use: no real answer starts or ends with it


def _probe(message: dict) -> dict:
    out = {k: v for k, v in message.items() if k not in ("reasoning_content", "tool_calls")}
    out["content"] = PROBE
    return out


def _render(
    tok: Any,
    completion: Completion,
    messages: list[dict],
    tools: list | None,
    generation_prompt: bool,
    kwargs: dict[str, Any],
) -> str:
    try:
        return tok.apply_chat_template(
            messages,
            tools=tools,
            tokenize=False,
            add_generation_prompt=generation_prompt,
            **kwargs,
        )
    except Exception as exc:  # jinja2 raises many types, incl. the template's raise_exception
        raise InputError(
            f"{completion.label}: the chat template cannot render this conversation: {exc}",
            kind="template_error",
        ) from exc


def _diff_region(a: str, b: str) -> tuple[int, int] | None:
    """The range of `a` that differs from `b`: after their common prefix, before the suffix."""
    if a == b:
        return None
    prefix = _common_prefix(a, b)
    limit = min(len(a), len(b)) - prefix
    suffix = _common_prefix(a[::-1], b[::-1], limit)
    return prefix, len(a) - suffix


def _common_prefix(a: str, b: str, limit: int | None = None) -> int:
    """Length of the common prefix, by bisection over slice comparisons (done in C)."""
    lo, hi = 0, min(len(a), len(b)) if limit is None else limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
