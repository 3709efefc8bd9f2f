"""Chat messages in one shape: OpenAI-style role/content dicts.

Every input format ends here, so the rules live in one place: which role labels mean what,
how a list of content blocks becomes text (text blocks are joined; images, audio and other
blocks are dropped and counted by type, or kept with `keep_multimodal`; thinking blocks and
their signatures are never forwarded: a drafter must learn the target's own reasoning), and
how inline `<think>` reasoning is split off.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from regen.errors import InputError

ROLES = ("system", "developer", "user", "assistant", "tool")

# ShareGPT and friends label turns differently; these are the labels seen in public datasets.
ROLE_ALIASES: dict[str, str] = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "model": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "tool": "tool",
    "function": "tool",
    "observation": "tool",
    "ipython": "tool",
    "function_response": "tool",
}

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def canonical_role(label: Any, extra_aliases: dict[str, str] | None = None) -> str:
    """Map a role label to one of ROLES, or say which label is unknown and how to map it."""
    if not isinstance(label, str):
        raise InputError(f"role must be a string, got {type(label).__name__}", kind="bad_role")
    key = label.strip().lower()
    role = (extra_aliases or {}).get(key) or ROLE_ALIASES.get(key)
    if role is None:
        raise InputError(
            f"unknown role label {label!r}",
            kind="unknown_role",
            hint=f"use one of {', '.join(ROLES)}, or map the label where regen prepare converts "
            f"the file: `--role-map {key}=user` (or assistant/system/tool) on its command "
            "line, `role_map:` in its recipe",
        )
    return role


def content_text(content: Any) -> tuple[str, int]:
    """Return (text, number of non-text blocks dropped) for a string or a list of blocks."""
    dropped: Counter[str] = Counter()
    text = flatten(content, keep_multimodal=False, dropped=dropped)
    assert isinstance(text, str)  # without keep_multimodal only text remains
    return text, sum(dropped.values())


TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
NEVER_FORWARDED = frozenset({"thinking", "redacted_thinking", "reasoning"})


def flatten(content: Any, *, keep_multimodal: bool, dropped: Counter) -> str | list[dict]:
    """Text for string or text-only content (parts joined as `join_text_parts` says); a list
    of OpenAI parts only when non-text blocks are kept. `dropped` counts every block left
    out, by its type."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        raise InputError(
            f"content must be a string or a list of blocks, got {type(content).__name__}",
            kind="bad_content",
        )
    parts: list[dict] = []
    for block in content:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
            continue
        if not isinstance(block, dict):
            raise InputError(f"a content block is a {type(block).__name__}", kind="bad_content")
        kind = str(block.get("type", "text"))
        if kind in TEXT_TYPES:
            text = block.get("text")
            if not isinstance(text, str):
                raise InputError("a text block has no string 'text'", kind="bad_content")
            parts.append({"type": "text", "text": text})
        elif kind in NEVER_FORWARDED or not keep_multimodal:
            dropped[kind] += 1
        else:
            parts.append(_openai_part(block))
    if all(p["type"] == "text" for p in parts):
        return join_text_parts([p["text"] for p in parts])
    return parts


def join_text_parts(texts: list[str]) -> str:
    """Text parts as one string, a newline between two, as vLLM's chat renderer joins a
    message's text parts for the template (vllm/renderers/chat_utils.py, 0.32): the prompt
    kept is the one the engine would have shown the model."""
    return "\n".join(texts)


def _openai_part(block: dict) -> dict:
    """Anthropic base64 images become OpenAI data URLs; other blocks pass through as given."""
    source = block.get("source")
    if block.get("type") == "image" and isinstance(source, dict):
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
        else:
            url = str(source.get("url", ""))
        return {"type": "image_url", "image_url": {"url": url}}
    return block


def is_empty(content: str | list[dict] | None) -> bool:
    if isinstance(content, str):
        return not content.strip()
    return not content


def no_user_text(messages: list[dict]) -> bool:
    """Every user turn is empty or blank: there is nothing to answer. `regen prepare` rejects
    such a prompt, `regen generate` refuses it and `regen check` flags it (`empty_prompt`),
    all by this one rule (and `asks_nothing`'s)."""
    return all(is_empty(m.get("content")) for m in messages if m.get("role") == "user")


def asks_nothing(prompt: list[dict]) -> bool:
    """The prompt (the turns before the answer) ends with a user turn that is empty or blank,
    even after turns with text: the turn being answered asks nothing, as `{"prompt": ""}`.
    A prompt that ends with a tool result asks the model to go on from it: not this rule."""
    return bool(prompt) and prompt[-1].get("role") == "user" and is_empty(prompt[-1].get("content"))


def split_inline_think(content: str) -> tuple[str | None, str]:
    """Split `<think>reasoning</think>answer` into (reasoning, answer).

    Also handles a template that opened `<think>` in the prompt (the text holds only
    `reasoning</think>answer`) and an unterminated block cut by max tokens (all reasoning).
    Returns (None, content) when there is no think markup.
    """
    stripped = content.lstrip()
    if stripped.startswith(THINK_OPEN):
        body = stripped[len(THINK_OPEN) :]
        reasoning, sep, answer = body.partition(THINK_CLOSE)
        if not sep:
            return body.strip(), ""
        return reasoning.strip(), answer.lstrip()
    if THINK_CLOSE in content and THINK_OPEN not in content:
        reasoning, _, answer = content.partition(THINK_CLOSE)
        return reasoning.strip(), answer.lstrip()
    return None, content


def normalise_message(raw: Any, extra_aliases: dict[str, str] | None = None) -> dict:
    """One OpenAI-style message from role/content or ShareGPT from/value."""
    if not isinstance(raw, dict):
        raise InputError(f"a message must be an object, got {type(raw).__name__}", kind="bad_type")
    label = raw.get("role", raw.get("from"))
    if label is None:
        raise InputError("a message has neither 'role' nor 'from'", kind="bad_message")
    role = canonical_role(label, extra_aliases)
    text, dropped = content_text(raw.get("content", raw.get("value")))
    if dropped:
        raise InputError(
            f"a {role} message has {dropped} non-text content block(s)",
            kind="non_text_content",
            hint="run the file through `regen prepare`, which drops or keeps them explicitly",
        )
    message: dict[str, Any] = {"role": role, "content": text}
    if role == "assistant" and raw.get("tool_calls"):
        message["tool_calls"] = raw["tool_calls"]
    if role == "tool":
        for key in ("tool_call_id", "name"):
            if raw.get(key) is not None:
                message[key] = raw[key]
    return message


def normalise_messages(raw: Any, extra_aliases: dict[str, str] | None = None) -> list[dict]:
    if not isinstance(raw, list) or not raw:
        raise InputError("messages must be a non-empty list", kind="bad_type")
    return [normalise_message(m, extra_aliases) for m in raw]
