"""What a person watching `regen generate` sees: a live panel on a terminal (`live`), or
plain one-line summaries at a fixed interval when stdout is a log file (`plain`); both
word the figures the same way (`text`)."""

from __future__ import annotations

import sys
from typing import Any

from regen.display.live import LiveReporter
from regen.display.plain import PlainReporter
from regen.display.servers import server_cells, server_table
from regen.display.text import (
    config_lines,
    format_duration,
    quality_lines,
    quality_rates_text,
    summary_line,
)

__all__ = [
    "LiveReporter",
    "NullReporter",
    "PlainReporter",
    "config_lines",
    "format_duration",
    "make_reporter",
    "quality_lines",
    "quality_rates_text",
    "server_cells",
    "server_table",
    "summary_line",
]


class NullReporter:
    def __call__(self, snap: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


def make_reporter(mode: str, interval: float) -> NullReporter | PlainReporter | LiveReporter:
    if mode == "none":
        return NullReporter()
    if mode == "live" or (mode == "auto" and sys.stdout.isatty()):
        return LiveReporter()
    return PlainReporter(interval)
