"""Message content as a string or a list of blocks, made explicit: nothing vanishes unseen.

Text blocks are joined. Other blocks (images, audio, documents) are dropped and counted by
type, or kept with `keep_multimodal`. Thinking blocks and their signatures are never
forwarded: a drafter must learn the target's own reasoning, not a copy of another model's.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from regen.errors import InputError

TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
NEVER_FORWARDED = frozenset({"thinking", "redacted_thinking", "reasoning"})


def flatten(content: Any, *, keep_multimodal: bool, dropped: Counter) -> str | list[dict]:
    """Text for string or text-only content; a list of OpenAI parts only when non-text blocks
    are kept. `dropped` counts every block left out, by its type."""
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
        return "".join(p["text"] for p in parts)
    return parts


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


def is_empty(content: str | list[dict]) -> bool:
    if isinstance(content, str):
        return not content.strip()
    return not content
