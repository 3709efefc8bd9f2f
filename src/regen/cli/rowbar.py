"""A progress bar over the rows a verb reads (prepare, check, export run for many minutes on
millions of rows): rows so far, rows per second and elapsed time, per source or run, on
stderr when stderr is a terminal. Library functions take it as a plain callback,
`on_row(label)`, called once per row read, so they do not know about terminals."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

RowHook = Callable[[str], None]
REDRAW_S = 0.1  # counting is per row, drawing is not: a million rows, a few hundred redraws


class RowRate(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if speed is None and task.elapsed:  # too few samples for rich's own estimate
            speed = task.completed / task.elapsed
        return Text(f"{task.completed:,.0f} rows  {speed or 0:,.0f} rows/s", style="magenta")


class RowBar:
    """One bar per label (a source, a run directory), counting rows as they are read."""

    def __init__(self, verb: str, console: Console) -> None:
        self.verb = verb
        self.bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            RowRate(),
            TimeElapsedColumn(),
            console=console,
            auto_refresh=False,
        )
        self.label: str | None = None
        self.task: TaskID | None = None
        self.count = 0
        self.drawn = 0.0

    def __call__(self, label: str) -> None:
        if label != self.label:
            self.flush()
            if self.task is not None:
                self.bar.update(self.task, total=self.count)  # that one is complete
            self.label, self.count = label, 0
            self.task = self.bar.add_task(f"{self.verb} {label}", total=None)
        self.count += 1
        now = time.monotonic()
        if now - self.drawn >= REDRAW_S:
            self.flush()
            self.drawn = now

    def flush(self) -> None:
        """Drawn from here, as rows come, not by a thread of its own: a process without
        threads can start its workers as copies of itself (regen.executors.pool)."""
        if self.task is not None:
            self.bar.update(self.task, completed=self.count)
            self.bar.refresh()


@contextlib.contextmanager
def row_progress(verb: str, enabled: bool | None = None) -> Iterator[RowHook | None]:
    """Yield the `on_row` callback, or None when stderr is not a terminal (logs stay clean)."""
    if not (sys.stderr.isatty() if enabled is None else enabled):
        yield None
        return
    rows = RowBar(verb, Console(stderr=True, highlight=False))
    with rows.bar:
        try:
            yield rows
        finally:
            rows.flush()
            if rows.task is not None:
                rows.bar.update(rows.task, total=rows.count)
