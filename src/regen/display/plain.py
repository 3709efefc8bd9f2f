"""The display for a log file (setsid, tmux, nohup): the header, then one time-stamped
summary line every interval and each event as it happens."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from regen.display.text import config_lines, resume_line, summary_line
from regen.format.state import is_final


class PlainReporter:
    def __init__(self, interval: float, stream: TextIO | None = None) -> None:
        self.interval = interval
        self.stream = stream or sys.stdout
        self._last = 0.0
        self._events_seen = 0
        self._started = False

    def __call__(self, snap: dict[str, Any]) -> None:
        if "config" in snap:
            for line in config_lines(snap["config"]):
                self._print(line)
            return
        if not self._started and (resuming := resume_line(snap)):
            self._print(resuming)
        self._started = True
        self._print_events(snap)
        now = time.monotonic()
        if now - self._last >= self.interval or is_final(snap["state"]):
            self._last = now
            self._print(summary_line(snap))

    def _print_events(self, snap: dict[str, Any]) -> None:
        new = snap["events_total"] - self._events_seen
        for event in snap["events"][-new:] if new > 0 else []:
            self._print(f"event {event}")
        self._events_seen = snap["events_total"]

    def _print(self, text: str) -> None:
        print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {text}", file=self.stream, flush=True)

    def close(self) -> None:
        pass
