"""Short hands for tests that drive a Fleet directly: a fast retry policy, a chat body, and a
bounded wait for a condition on the running loop."""

from __future__ import annotations

import asyncio

from regen.fleet.dispatch import RetryPolicy

FAST = RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.05)


def chat(i: int) -> dict:
    return {"model": "fake-model", "messages": [{"role": "user", "content": f"prompt {i}"}]}


async def until(predicate, timeout: float = 20.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")
