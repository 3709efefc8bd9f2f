"""What a person watching `regen generate` sees: a live panel on a terminal, or plain
one-line summaries at a fixed interval when stdout is a log file (setsid, tmux, nohup)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

FINAL_STATES = ("finished", "stopped", "calibrated")  # "calibrated": regen plan's sample is in


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
        f"{k}={'server default' if v is None else v}" for k, v in config["sampling"].items()
    )
    return [
        f"model       {config['model']}",
        f"servers     {len(config['servers'])} x {config['concurrency_per_server']} in flight: "
        + " ".join(config["servers"]),
        f"prompts     {config['prompts']}",
        f"output      {config['output_dir']}",
        f"sampling    {sampling}",
        f"samples     {config['samples_per_prompt']} per prompt, "
        f"regenerate {config['regenerate_turns']} turn(s)",
    ]


class PlainReporter:
    def __init__(self, interval: float, stream: TextIO | None = None) -> None:
        self.interval = interval
        self.stream = stream or sys.stdout
        self._last = 0.0
        self._events_seen = 0

    def __call__(self, snap: dict[str, Any]) -> None:
        if "config" in snap:
            for line in config_lines(snap["config"]):
                self._print(line)
            return
        self._print_events(snap)
        now = time.monotonic()
        if now - self._last >= self.interval or snap["state"] in (
            "finished",
            "stopped",
            "calibrated",
        ):
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


class LiveReporter:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self.live: Live | None = None

    def __call__(self, snap: dict[str, Any]) -> None:
        if "config" in snap:
            for line in config_lines(snap["config"]):
                self.console.print(line)
            self.live = Live(console=self.console, refresh_per_second=2, transient=False)
            self.live.start()
            return
        if self.live is not None:
            self.live.update(self._render(snap))
            if snap["state"] in FINAL_STATES:
                self.live.stop()
                self.live = None

    def _render(self, snap: dict[str, Any]) -> Group:
        table = Table(box=None, expand=False)
        for column in ("server", "state", "in flight", "done", "failed", "latency", "last error"):
            table.add_column(column)
        for s in snap["servers"]:
            style = "green" if s["state"] == "healthy" else "red"
            table.add_row(
                s["url"], Text(s["state"], style=style), str(s["in_flight"]),
                str(s["completed"]), str(s["failed"]), f"{s['latency_ewma_s']:.1f}s",
                (s["last_error"] or "")[:50],
            )  # fmt: skip
        parts: list[Any] = [Text(summary_line(snap), style="bold"), table]
        parts += [Text(f"  {e}", style="yellow") for e in snap["events"][-5:]]
        return Group(*parts)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()


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
