"""The message roles each engine's server takes, and what regen sends for one it does not.

OpenAI's `developer` role (kept by `regen prepare` from OpenAI rows) is the system prompt of
newer models. llama-cpp-python's server validates messages against the roles it knows and
has no `developer` (LC:llama_types.py ChatCompletionRequestMessage in 0.3.36), so it answers
such a request with HTTP 500 whatever the chat template: regen sends the turn as `system`
there, and the record says so (`meta.roles_sent`). vLLM makes the same change itself where the
model's template does not name the role (VL:renderers/hf.py:512-525, 804-805 in 0.32.0), and
SGLang passes the role to the template: both get the conversation as it is.
"""

from __future__ import annotations

from typing import Any

SENT_AS: dict[str, dict[str, str]] = {"llamacpp": {"developer": "system"}}


def with_roles(engine: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` with each role `engine` does not take replaced (the body is not changed)."""
    renamed = SENT_AS.get(engine)
    messages = body.get("messages")
    if not renamed or not isinstance(messages, list) or not roles_sent(engine, messages):
        return body
    out = [{**m, "role": renamed[m["role"]]} if _role(m) in renamed else m for m in messages]
    return {**body, "messages": out}


def roles_sent(engine: str, messages: list[Any]) -> dict[str, str] | None:
    """The roles of `messages` sent to `engine` as others ({"developer": "system"}), or None."""
    renamed = SENT_AS.get(engine, {})
    found = {_role(m): renamed[_role(m)] for m in messages if _role(m) in renamed}
    return found or None


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None
