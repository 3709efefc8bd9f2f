"""A server's streamed requests that have no first token yet: the ones a lowered level
withdraws (`withdraw`), youngest first, to be sent again at once wherever there is room.

When live concurrency lowers a level (a KV cliff, a full server), the requests past the new
level would otherwise stay where they are until they finish: in a thrashing engine, the
slowest of all, and the last to finish at the end of a run. A request still waiting for
its first token has cost the engine nothing it keeps (vLLM and SGLang abort a request whose
client went away); sent again, it waits in the client's line instead, and goes to the
first server with room. Only streamed requests are known to be waiting: a plain request is
silent until its answer is whole.
"""

from __future__ import annotations

import asyncio


class WaitingStreams:
    def __init__(self) -> None:
        self._since: dict[asyncio.Future, float] = {}  # request -> when it was sent
        self._withdrawn: set[asyncio.Future] = set()

    def __len__(self) -> int:
        return len(self._since)

    def sent(self, request: asyncio.Future | None, at: float) -> None:
        if request is not None:
            self._since[request] = at

    def started(self, request: asyncio.Future | None) -> None:
        """Its first token came, or it ended: no longer one to withdraw."""
        if request is not None:
            self._since.pop(request, None)

    def withdraw(self, count: int) -> int:
        """Cancel the `count` youngest waiting requests (fewer if fewer wait); how many."""
        youngest = sorted(self._since, key=self._since.__getitem__, reverse=True)[:count]
        for request in youngest:
            del self._since[request]
            self._withdrawn.add(request)
            request.cancel()
        return len(youngest)

    def was_withdrawn(self, request: asyncio.Future) -> bool:
        """Whether `request` was cancelled by `withdraw` (asked once, as it ends)."""
        if request in self._withdrawn:
            self._withdrawn.discard(request)
            return True
        return False
