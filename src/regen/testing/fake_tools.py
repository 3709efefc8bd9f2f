"""A fake target that calls tools, for agent-trace tests: an `answer` for `Behaviour`.

Asked after a user message, it calls one tool on the last word of that message (so a test
chooses, by what the user asked, whether the regenerated call is the dataset's or another);
asked after tool messages, it answers with what the last tool said. Call ids are new per
turn (`call_new_<n>`, n the assistant turns before it), as a real engine's are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from regen.testing.fake_behaviour import Answer


def tool_caller(
    name: str = "get_weather", arguments: Callable[[str], dict] | None = None
) -> Answer:
    """`arguments(last user text)` gives the call's arguments; default {"city": last word}."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        last = messages[-1]
        if last["role"] == "tool":
            return {"content": f"answer from tool: {last['content']}", "tokens": 8}
        text = str(last.get("content") or "")
        args = arguments(text) if arguments else {"city": text.rstrip("?.! ").split()[-1]}
        turn = sum(m["role"] == "assistant" for m in messages)
        call = {
            "id": f"call_new_{turn}",
            "type": "function",
            "function": {"name": name, "arguments": orjson.dumps(args).decode()},
        }
        return {"content": "", "tool_calls": [call], "tokens": 8, "finish_reason": "tool_calls"}

    return answer
