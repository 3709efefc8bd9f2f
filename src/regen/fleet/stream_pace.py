"""Read a slow stream a few events at a time: its socket is left unread for a short pause.

A thinking model's fleet streams thousands of answers at once, each a few tokens a second,
one token an event. Read as they come, every event wakes the client on its own (the kernel's
read, aiohttp's HTTP parser, the event loop resuming the stream's task), and that wakeup,
not the event, is most of the client's CPU: ~25 µs a token, 0.75 core at 30K tokens/s
(docs/benchmarks-history.md, "At the scale of a seeds run"). So after a read that brought
data events the stream's transport stops reading for a pause, the kernel keeps what comes
meanwhile, and the next read takes it all at once.

The pause is the shortest of three bounds:
- `EVENTS_A_READ` of the stream's own event intervals: past that many events a read, a longer
  pause saves little CPU and only delays the answer;
- `AGE_SHARE` of the request's age: a stream's end is seen at most this share of its time
  late, so its slot's next request is held back as little (a short answer barely pauses);
- `MAX_PAUSE_S`, and a small share of the stall timeout, so the stall clock (time since the
  last data event read, stream.StallWatch) never runs out while data waits unread: a pause
  starts only right after data events, and it ends long before the server's silence could.
No pause after the finish reason (the rest of the answer follows at once). The pause is in
proportion to the streams the process holds, whole from `FULL_PACE_STREAMS` on: a few dozen
streams cost little CPU read as they come, and their answers' ends are then seen at once.
"""

from __future__ import annotations

import asyncio

EVENTS_A_READ = 16
AGE_SHARE = 0.1
MAX_PAUSE_S = 4.0
FULL_PACE_STREAMS = 1024
STALL_SHARE = 0.25  # of the stall timeout: a stall is still found within 1.25x of it
MIN_PAUSE_S = 0.01  # shorter is not worth a timer: the reads already batch events


def longest_pause(stall: float) -> float:
    """The longest a stream's socket is left unread, under a stall timeout of `stall` s."""
    return min(MAX_PAUSE_S, STALL_SHARE * stall)


class ReadPacer:
    """Pauses one stream's transport after its reads; `close()` before the connection goes
    back to aiohttp's pool, so that no pooled connection stays paused."""

    open_streams = 0  # in this process: how long a pause is (see above)

    def __init__(self, transport: asyncio.Transport | None, stall: float, started: float):
        ReadPacer.open_streams += 1
        self._open = True
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        self._cap = longest_pause(stall)
        self._started = started  # the request's start, on the loop's clock
        self._first: float | None = None  # the first read that brought events
        self._events = 0  # events read since that first read
        self._timer: asyncio.TimerHandle | None = None

    def after_read(self, events: int, now: float, finished: bool) -> None:
        """A read brought `events` data events at `now`; `finished`: the answer's finish
        reason is among them."""
        if not events or finished or self._transport is None:
            return
        if self._first is None:
            self._first = now  # an interval needs a second read to measure from here
            return
        self._events += events
        interval = (now - self._first) / self._events
        pause = min(self._cap, EVENTS_A_READ * interval, AGE_SHARE * (now - self._started))
        pause *= min(1.0, ReadPacer.open_streams / FULL_PACE_STREAMS)
        if pause >= MIN_PAUSE_S:
            self._transport.pause_reading()
            self._timer = self._loop.call_later(pause, self._resume)

    def _resume(self) -> None:
        self._timer = None
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def close(self) -> None:
        if self._open:
            self._open = False
            ReadPacer.open_streams -= 1
        if self._timer is not None:
            self._timer.cancel()
            self._resume()
