"""Chat messages in one shape: OpenAI-style role/content dicts.

Every input format ends here, so the rules live in one place: which role labels mean what,
how a list of content blocks becomes text, and how inline `<think>` reasoning is split off.
"""

from __future__ import annotations

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

TEXT_BLOCK_TYPES = ("text", "input_text", "output_text")
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
            hint=f"use one of {', '.join(ROLES)}, or map it with `regen prepare --role-map "
            f"{key}=user` (or assistant/system/tool)",
        )
    return role


def content_text(content: Any) -> tuple[str, int]:
    """Return (text, number of non-text blocks dropped) for a string or a list of blocks.

    Thinking blocks (and their signatures) are never forwarded: they count as dropped.
    """
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        raise InputError(
            f"content must be a string or a list of blocks, got {type(content).__name__}",
            kind="bad_content",
        )
    parts: list[str] = []
    dropped = 0
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type", "text") in TEXT_BLOCK_TYPES:
            text = block.get("text")
            if not isinstance(text, str):
                raise InputError("a text block has no string 'text'", kind="bad_content")
            parts.append(text)
        else:
            dropped += 1
    return "".join(parts), dropped


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
