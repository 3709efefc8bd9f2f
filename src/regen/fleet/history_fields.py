"""How the reasoning of earlier assistant turns goes back to each engine in a chat request.

regen keeps an assistant message's reasoning as `reasoning_content` (the name chat templates
read: Qwen3's renders `message.reasoning_content` for the turns after the last user
message). Each engine is sent the field it reads, and never one it rejects:

- vLLM reads `reasoning` on an input message, renames a deprecated `reasoning_content` to it
  (VL:entrypoints/openai/chat_completion/protocol.py:555-579 in 0.32.0, the CPU build the
  tests run for real), and hands the template both names (VL:renderers/chat_utils.py:
  2105-2110); regen sends `reasoning`, the name that stays.
- SGLang reads `reasoning_content` (ChatCompletionMessageGenericParam,
  SG:entrypoints/openai/protocol.py) and silently drops a field it does not know.
- llama-cpp-python's server (0.3.x) validates messages against TypedDicts without a
  reasoning field and drops it silently (LC:llama_types.py:233-239, pydantic ignores the
  extra key), so its templates never see reasoning; it is sent as `reasoning_content`, the
  name templates read, for a build that keeps it.
- An engine regen could not identify (a proxy, a hosted API) gets no reasoning at all: a
  strict server answers an unknown message field with a 400 for every request.
"""

from __future__ import annotations

from typing import Any

KEPT_AS = "reasoning_content"  # how regen stores it, and the history carries it
SENT_AS: dict[str, str | None] = {
    "vllm": "reasoning",
    "sglang": "reasoning_content",
    "llamacpp": "reasoning_content",
}


def with_history_fields(engine: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` with each assistant message's reasoning under the field `engine` reads (the
    body is not changed; messages without reasoning are passed as they are)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not any(_has_reasoning(m) for m in messages):
        return body
    field = SENT_AS.get(engine)
    return {**body, "messages": [_renamed(m, field) if _has_reasoning(m) else m for m in messages]}


def _has_reasoning(message: Any) -> bool:
    return isinstance(message, dict) and KEPT_AS in message


def _renamed(message: dict[str, Any], field: str | None) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if k != KEPT_AS}
    reasoning = message[KEPT_AS]
    if field is not None and message.get("role") == "assistant" and reasoning:
        out[field] = reasoning
    return out
