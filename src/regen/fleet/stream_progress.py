"""How far a streamed request has come, told to whoever sent it: the end game asks whether a
request it may copy still streams, or has gone silent (a stalled stream, which only
`--stall-timeout` would otherwise cut, five minutes by default, at the very end of a run).

The sender sets `CURRENT` in the context of the task it sends the request in; the server's
stream reader (server.py) updates it at each read that brought data events. A context
variable, because the request's own HTTP task is started deep inside `Server.post` (so that
a health check can abort it) and inherits its sender's context, where no handle to it would.
"""

from __future__ import annotations

from contextvars import Context, ContextVar, copy_context
from dataclasses import dataclass


@dataclass(slots=True)
class Progress:
    # One clock on both sides: the reader writes its loop.time() (server.py), the end game
    # compares it with time.monotonic() (endgame.py, forecast.py); asyncio's default loop
    # answers time() with time.monotonic(), and regen runs no other (asyncio.run, no uvloop).
    last_data: float | None = None  # the loop's time of the last data event read (None: no
    # first token yet: waiting for its turn in the engine, which is not a stall)
    events: int = 0  # data events read: about the answer's tokens so far

    def heard(self, events: int, now: float) -> None:
        self.last_data = now
        self.events += events

    def silent_for(self, now: float) -> float | None:
        """Seconds since its last data event; None before the first one."""
        return None if self.last_data is None else now - self.last_data


CURRENT: ContextVar[Progress | None] = ContextVar("regen_stream_progress", default=None)


def context_with(progress: Progress | None) -> Context:
    """A copy of the current context in which CURRENT is `progress`: a task started in it
    reports there (None: to nobody; a copy's task must not report as its original)."""
    context = copy_context()
    context.run(CURRENT.set, progress)
    return context
