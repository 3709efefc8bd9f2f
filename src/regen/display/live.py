"""The display for a terminal: a rich panel redrawn from each snapshot."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.text import Text

from regen.display.servers import server_table
from regen.display.text import config_lines, format_duration, quality_lines, resume_line
from regen.format.state import is_final


class EtaColumn(ProgressColumn):
    """The run's own ETA (from tokens: long answers dominate the time left), not rich's
    estimate from item counts."""

    def __init__(self) -> None:
        super().__init__(table_column=Column(no_wrap=True))

    def render(self, task: Task) -> Text:
        return Text(f"ETA {format_duration(task.fields.get('eta_s'))}", style="cyan")


class RateColumn(ProgressColumn):
    def __init__(self) -> None:
        super().__init__(table_column=Column(no_wrap=True))  # the bar gives way, not this

    def render(self, task: Task) -> Text:
        rate = task.fields.get("rate") or {"completions_per_s": 0.0, "tokens_per_s": 0.0}
        return Text(
            f"{rate['completions_per_s']:.2f} compl/s  {rate['tokens_per_s']:,.0f} tok/s",
            style="magenta",
        )


class LiveReporter:
    """A progress bar (done/total, rate, tokens/s, elapsed, token-based ETA), one row per
    server, the quality rates and the last events, redrawn from each snapshot. Highlighting
    is off: rich would colour random numbers and words in server messages."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        self.live: Live | None = None
        # on a narrow terminal the elapsed time goes: the rates and the ETA must fit one line
        elapsed = [TextColumn("elapsed"), TimeElapsedColumn()] if self.console.width > 90 else []
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=None),
            MofNCompleteColumn(table_column=Column(no_wrap=True)),
            TaskProgressColumn(),
            RateColumn(),
            *elapsed,
            EtaColumn(),
            console=self.console,
            expand=True,
        )
        self.task = self.bar.add_task("generate", total=None, eta_s=None, rate=None)
        self._started = False

    def __call__(self, snap: dict[str, Any]) -> None:
        if "config" in snap:
            for line in config_lines(snap["config"]):
                self.console.print(Text(line))
            self.live = Live(console=self.console, refresh_per_second=4, transient=False)
            self.live.start()
            return
        if not self._started and (resuming := resume_line(snap)):
            self.console.print(Text(resuming))
        self._started = True
        if self.live is not None:
            self.live.update(self.render(snap))
            if is_final(snap["state"]):
                self.live.stop()
                self.live = None

    def render(self, snap: dict[str, Any]) -> Group:
        self.bar.update(
            self.task,
            total=snap["total"],
            completed=snap["finished"],
            eta_s=snap["eta_s"],
            rate=snap["rates"]["last_1m"],
            description=snap["state"],
        )
        width = self.console.width
        parts: list[Any] = [self.bar, server_table(snap["servers"], width)]
        parts += [Text(line) for line in quality_lines(snap, width)]
        if snap.get("all_servers_down_for_s") is not None:
            waited = snap["all_servers_down_for_s"]
            parts.append(Text(f"WAITING: all servers down for {waited:.0f}s", style="bold red"))
        parts += [Text(f"ALARM {a}", style="bold red") for a in snap["quality"]["alarms"]]
        parts += [Text(f"  {e}", style="yellow") for e in snap["events"][-5:]]
        return Group(*parts)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
