"""Why a run stops dispatching, as a type rather than a string, and the one place that
records it: the first reason wins, and every wait in the dispatcher can see it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from enum import Enum


class StopReason(Enum):
    """Each reason's value is the exit code it ends the run with."""

    DEGENERATE = 4  # --abort-on-degenerate and a quality alarm fired
    FLEET_DOWN = 5  # no server could serve (down for --give-up-after, or refusing us)
    FAILED = 1  # a RegenError stopped the run; that error decides the exit code
    SIGINT = 130
    SIGTERM = 143

    @property
    def exit_code(self) -> int:
        return self.value

    @property
    def is_signal(self) -> bool:
        return self in (StopReason.SIGINT, StopReason.SIGTERM)

    @classmethod
    def from_signal(cls, sig: signal.Signals) -> StopReason:
        return cls[sig.name]

    @property
    def label(self) -> str:
        return self.name if self.is_signal else self.name.lower()

    def draining(self, in_flight: int, timeout: float) -> str:
        """The one line a stop prints while requests finish (a signal says nothing before
        it: two lines would say the same)."""
        what = f"{self.label} received" if self.is_signal else f"stopping ({self.label})"
        again = f" ({self.label} again leaves at once)" if self.is_signal else ""
        return (
            f"{what}: no new requests; waiting up to {timeout:.0f}s for {in_flight} "
            f"request(s) in flight{again}"
        )


class Stop:
    """The run's stop state. `event` is set once a reason is recorded, so that waits on a
    free slot or a backoff end at once instead of when the fleet comes back."""

    def __init__(self) -> None:
        self.reason: StopReason | None = None
        self.event = asyncio.Event()

    def __bool__(self) -> bool:
        return self.reason is not None

    def request(self, reason: StopReason) -> bool:
        """Record `reason` unless one is already recorded (a signal outranks any other
        reason: it decides the exit code); True if this call recorded it."""
        if self.reason is not None and (self.reason.is_signal or not reason.is_signal):
            return False
        self.reason = reason
        self.event.set()
        return True


@contextlib.contextmanager
def signals_handled(
    loop: asyncio.AbstractEventLoop, handler: Callable[[signal.Signals], None]
) -> Iterator[None]:
    """SIGINT/SIGTERM go to `handler` while the block runs. Only possible in the main thread;
    a library caller running generate() in another thread keeps its own signal handling."""
    handled = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, handler, sig)
            handled.append(sig)
    try:
        yield
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


def on_signals(
    stop: Stop, request: Callable[[StopReason], None], leave: Callable[[], None]
) -> Callable[[signal.Signals], None]:
    """The SIGINT/SIGTERM handler of a run: the first asks it to finish what is in flight;
    a second leaves at once, after `leave()` (which stops servers the run started). Every
    record is one write() of a whole line, so exiting then leaves no half-written record."""

    def handle(sig: signal.Signals) -> None:
        reason = StopReason.from_signal(sig)
        if stop.reason is not None and stop.reason.is_signal:
            leave()
            os._exit(reason.exit_code)
        request(reason)  # the drain says what happens next, in one line

    return handle
