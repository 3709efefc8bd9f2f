"""The user's tool server (`--tool-server URL`): where the calls of regenerated turns run.

The contract (docs/generate.md, "Tool server"): regen POSTs one JSON object per call,

    {"conversation_id": "<prompt id>#<sample>", "turn": 3, "index": 0,
     "call_id": "call_x", "name": "get_weather", "arguments": {"city": "Paris"}}

(`arguments` parsed from the call's JSON string; the string itself when it is not JSON) and
the server answers 200 with `{"content": "..."}`, the tool message's content, or
`{"error": "..."}`, a failed call, stored as the tool's answer as the target would see it.
Calls of a turn are sent one at a time, in order. `conversation_id`, `turn` and `index` name
a call the same way however often a killed run sends it again, so a server with state can
answer a repeated call as it did the first time.

A tool server that does not answer (refused, reset, a timeout, 5xx, 429) pauses the calls
waiting on it, as a down fleet pauses requests, for up to --give-up-after; then the run stops
with the conversations unwritten, to resume later. One that refuses (4xx, an answer that is
not the contract's) stops the run at once: it would refuse every call alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson

from regen import redact
from regen.errors import FleetUnavailable, RetryableError, ServerError
from regen.fleet.dispatch import DispatchHalted
from regen.fleet.http_errors import decode_body, map_errors
from regen.fleet.policy import RetryPolicy
from regen.fleet.server import Timeouts
from regen.tool_trace import arguments_as_sent

CONTRACT_HINT = (
    'a tool server answers each POST with 200 and JSON {"content": ...} or {"error": ...} '
    "(see the tool server contract in docs/generate.md); fix it and run the same command again"
)


class ToolServer:
    def __init__(
        self,
        url: str,
        timeouts: Timeouts,
        retry: RetryPolicy,
        give_up_after: float,
        on_event: Callable[[str], None],
    ) -> None:
        self.url = url
        self.timeouts, self.retry, self.give_up_after = timeouts, retry, give_up_after
        self.on_event = on_event
        self.calls = 0  # answered calls, for the tests and the summary
        self.down_since: float | None = None
        self._halted = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None

    def halt(self) -> None:
        """The run stops: calls waiting out an outage leave now, their rows unwritten."""
        self._halted.set()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def answer_all(self, conversation_id: str, turn: int, calls: list[dict]) -> list[dict]:
        """The tool messages answering `calls`, in order."""
        results = []
        for index, call in enumerate(calls):
            fn = call.get("function") if isinstance(call.get("function"), dict) else call
            request = {
                "conversation_id": conversation_id,
                "turn": turn,
                "index": index,
                "call_id": call.get("id"),
                "name": fn.get("name"),
                "arguments": arguments_as_sent(call),
            }
            content = await self.call(request)
            results.append(
                {
                    "role": "tool",
                    "tool_call_id": call.get("id"),
                    "name": fn.get("name"),
                    "content": content,
                }
            )
        return results

    async def call(self, request: dict[str, Any]) -> str:
        """One call to an answer, waiting out an outage (up to --give-up-after)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                answer = await self._post(request)
            except RetryableError as err:
                await self._wait_out(err, attempt)
                continue
            except ServerError as err:  # 4xx or a body that is not JSON: every call alike
                raise FleetUnavailable(
                    f"the tool server {self.url} refused a call: {err.message}", hint=CONTRACT_HINT
                ) from err
            if self.down_since is not None:
                self.on_event(f"the tool server {self.url} answers again")
                self.down_since = None
            self.calls += 1
            return self._content(answer)

    async def _wait_out(self, err: ServerError, attempt: int) -> None:
        """Wait before the next try, never past --give-up-after: a backoff of 30 s drawn 2 s
        before the deadline would stop the run long after it (the last try is at the
        deadline, and the run gives up when it fails)."""
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = now
            self.on_event(
                f"the tool server {self.url} does not answer ({err.message}); its calls wait for it"
            )
        left = self.give_up_after - (now - self.down_since) if self.give_up_after else math.inf
        if left <= 0:
            raise FleetUnavailable(
                f"the tool server {self.url} has not answered for {now - self.down_since:.0f}s "
                f"(--give-up-after {self.give_up_after:g})",
                hint="bring it back and run the same command again to resume, or raise "
                "--give-up-after",
            )
        assert isinstance(err, RetryableError)
        delay = min(self.retry.delay(min(attempt, 8), err), left)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._halted.wait(), delay)
        if self._halted.is_set():
            raise DispatchHalted

    async def _post(self, request: dict[str, Any]) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(headers={"Content-Type": "application/json"})
        timeout = aiohttp.ClientTimeout(
            total=self.timeouts.request, sock_connect=self.timeouts.connect
        )
        with map_errors(f"tool server {self.url}", self.timeouts.request):
            async with self._session.post(
                self.url, data=orjson.dumps(request), timeout=timeout
            ) as resp:
                return decode_body(resp, await resp.read(), f"tool server {self.url}")

    def _content(self, answer: Any) -> str:
        if isinstance(answer, dict):
            for key in ("content", "error"):
                value = answer.get(key)
                if isinstance(value, str):
                    return value
                if value is not None:
                    return orjson.dumps(value).decode()
        raise FleetUnavailable(
            f"the tool server {self.url} answered {redact.scrub(str(answer)[:200])}",
            hint=CONTRACT_HINT,
        )
