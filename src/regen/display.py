"""What a person watching `regen generate` sees: a live panel on a terminal, or plain
one-line summaries at a fixed interval when stdout is a log file (setsid, tmux, nohup)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

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
from rich.table import Column, Table
from rich.text import Text

from regen.fleet.engine_defaults import server_default_note
from regen.format.state import is_final


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


def summary_line(snap: dict[str, Any]) -> str:
    total = snap["total"] or 1
    rate = snap["rates"]["last_1m"]
    up = sum(s["state"] == "healthy" for s in snap["servers"])
    in_flight = sum(s["in_flight"] for s in snap["servers"])
    errors = sum(snap["errors_by_type"].values())
    line = (
        f"{snap['finished']}/{snap['total']} ({100 * snap['finished'] / total:.1f}%) "
        f"{rate['completions_per_s']:.2f} compl/s {rate['tokens_per_s']:.0f} tok/s "
        f"ETA {format_duration(snap['eta_s'])} errors {errors} "
        f"servers {up}/{len(snap['servers'])} up, {in_flight} in flight"
    )
    if snap.get("all_servers_down_for_s") is not None:
        line += f" | WAITING: all servers down for {snap['all_servers_down_for_s']:.0f}s"
    for alarm in snap["quality"]["alarms"]:
        line += f" | ALARM {alarm}"
    return line


def config_lines(config: dict[str, Any]) -> list[str]:
    sampling = ", ".join(
        f"{k}={'server default' if v is None else v}"
        for k, v in config["sampling"].items()
        if k != "extra" or v  # per-record request fields (batch files) only when there are some
    )
    batch = config.get("batch_models")
    if batch is not None:  # what the flags set is only the default of a batch file
        sampling = f"per request, from the batch file's bodies; where a body has none: {sampling}"
    n, per = len(config["servers"]), config["concurrency_per_server"]
    lines = [
        f"model       {config['model']}",
        f"servers     {n} x {per} per server = {n * per} in flight: " + " ".join(config["servers"]),
        f"api key     {config.get('api_key_from', 'none')}",
        f"prompts     {config['prompts']}",
        f"output      {config['output_dir']}",
        f"sampling    {sampling}",
        *_server_defaults(config.get("engines") or []),
        f"samples     {config['samples_per_prompt']} per prompt, "
        f"regenerate {config['regenerate_turns']} turn(s)",
    ]
    other = [m for m in batch or [] if m != config["model"]]
    if other:  # the body's model is not sent: say so rather than drop it silently
        note = f"the batch file asks for {', '.join(other)}: every request goes to the model above"
        lines.insert(1, f"            {note} (pass --model, or serve that model)")
    return lines


def _server_defaults(engines: list[dict[str, Any]]) -> list[str]:
    """What "server default" means on each engine of the fleet (see engine_defaults)."""
    notes = list(dict.fromkeys(server_default_note(e) for e in engines))
    return [f"{'unset' if i == 0 else '':<11} {note}" for i, note in enumerate(notes)]


def resume_line(snap: dict[str, Any]) -> str | None:
    """Said once when a run resumes, so the count that starts at 10 does not look like a
    bug: "resuming: 10 of 15 already done"."""
    before = snap.get("session", {}).get("finished_before", 0)
    return f"resuming: {before} of {snap['total']} already done" if before else None


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
            TextColumn("[bold]{task.description}"), BarColumn(bar_width=None),
            MofNCompleteColumn(table_column=Column(no_wrap=True)), TaskProgressColumn(),
            RateColumn(), *elapsed,
            EtaColumn(), console=self.console, expand=True,
        )  # fmt: skip
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
            self.task, total=snap["total"], completed=snap["finished"], eta_s=snap["eta_s"],
            rate=snap["rates"]["last_1m"], description=snap["state"],
        )  # fmt: skip
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


# The server table's columns, most wanted first: on a narrow terminal the last ones are
# dropped whole. A cut column ("127.0.0.1:180…", "in flig…") makes servers on one host look
# the same; a missing one is only missing.
COLUMNS = ("server", "state", "in flight", "done", "failed", "latency", "tokens", "retried",
           "accept len")  # fmt: skip
ORDER = ("server", "state", "in flight", "done", "failed", "retried", "tokens", "latency",
         "accept len")  # fmt: skip
SPEC = "accept len"  # the serving drafter's tokens per verify step: only a speculating fleet
GAP = 2  # between columns: rich's padding of one on each side
LAST_ERROR_MIN = 16  # narrower than this, the last error says nothing: dropped


def server_cells(s: dict[str, Any]) -> dict[str, str]:
    return {
        "server": s["url"].split("://", 1)[-1], "state": s["state"],
        "in flight": _in_flight(s), "done": str(s["completed"]),
        "failed": str(s["failed"]), "latency": f"{s['latency_ewma_s']:.1f}s",
        "tokens": f"{s['completion_tokens']:,}", "retried": str(s.get("retried", 0)),
        SPEC: f"{s['acceptance_length']:.2f}" if s.get("spec_steps") else "-",
    }  # fmt: skip


def _in_flight(s: dict[str, Any]) -> str:
    """In flight, and of which level (live concurrency's choice, or the fixed one)."""
    level = s.get("concurrency")
    return str(s["in_flight"]) if level is None else f"{s['in_flight']}/{level}"


def server_table(servers: list[dict[str, Any]], width: int = 140) -> Table:
    """One row per server in `width` columns: host:port and state are never cut."""
    rows = [server_cells(s) for s in servers]
    shown, used = [], 0
    speculating = any(s.get("spec_steps") for s in servers)
    for column in (c for c in COLUMNS if c != SPEC or speculating):
        need = max([len(column), *(len(r[column]) for r in rows)]) + GAP
        if column in ("server", "state") or used + need <= width:
            shown.append(column)
            used += need
    table = Table(box=None, expand=False, pad_edge=False)
    for column in (c for c in ORDER if c in shown):
        table.add_column(column, justify="left" if column == "server" else "right", no_wrap=True)
    room = min(40, width - used - GAP)
    if room >= LAST_ERROR_MIN:  # a long server message is cut, not wrapped: one line each
        table.add_column("last error", no_wrap=True, overflow="ellipsis", max_width=room)
    for s, cells in zip(servers, rows, strict=True):
        style = "green" if s["state"] == "healthy" else "red"
        row: list[Any] = [
            Text(cells[c], style=style) if c == "state" else Text(cells[c])
            for c in ORDER if c in shown
        ]  # fmt: skip
        if room >= LAST_ERROR_MIN:
            row.append(Text((s["last_error"] or "")[:60]))
        table.add_row(*row)
    return table


def quality_rates_text(rates: dict[str, float]) -> str:
    """The rolling rates in words ("repeated answers 0.0%"); the keys stay snake_case in
    progress.json and the Prometheus labels."""
    return ", ".join(quality_items(rates))


def quality_items(rates: dict[str, float]) -> list[str]:
    return [f"{k.replace('_', ' ')} {v:.1%}" for k, v in rates.items()]


def quality_lines(snap: dict[str, Any], width: int = 140) -> list[str]:
    """The quality rates and the error count, broken between items (never inside "repeated
    answers 2.0%") to fit `width`."""
    quality = snap["quality"]
    items = [*quality_items(quality["rates"]), f"errors {sum(snap['errors_by_type'].values())}"]
    lines = [f"quality (last {quality['window']}):"]
    for item in items:
        if len(lines[-1]) + 2 + len(item) > width:
            lines.append("  " + item)
        else:
            lines[-1] += (" " if lines[-1].endswith(":") else ", ") + item
    return lines


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
