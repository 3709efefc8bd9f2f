"""Context overflow, made the same on every engine.

vLLM (and llama.cpp) lower max_tokens to what is left of the context and answer; SGLang
answers 400 "Requested token count exceeds the model's maximum context length of C tokens.
You requested a total of T tokens: N tokens from the input messages and M tokens for the
completion..." (sglang/srt/managers/tokenizer_manager.py:1353-1377 in 0.5.23). So the same
prompts gave different data on the two. regen retries such a request once with max_tokens
lowered to C - N, as vLLM would have, and the record says so. A prompt that alone fills the
context stays a permanent error on every engine.

The numbers exist only in the message, so this is the one place that reads an error's text;
the error's class is still decided by its status.
"""

from __future__ import annotations

import re

from regen.errors import PermanentError

# SG:managers/tokenizer_manager.py:1353-1377 (0.5.23)
_SGLANG_TOO_MANY = re.compile(
    r"Requested token count exceeds the model's maximum context length of (\d+) tokens\. "
    r"You requested a total of \d+ tokens: (\d+) tokens from the input messages"
)


def room_left(error: PermanentError) -> int | None:
    """The max_tokens that fits, when `error` is SGLang refusing prompt + max_tokens over its
    context while the prompt itself fits; else None."""
    if error.status != 400:
        return None
    match = _SGLANG_TOO_MANY.search(error.message)
    if match is None:
        return None
    context, prompt = int(match.group(1)), int(match.group(2))
    return context - prompt if prompt < context else None
