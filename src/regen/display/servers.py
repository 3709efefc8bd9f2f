"""The live panel's table of servers, fitted to the terminal's width."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

# The server table's columns, most wanted first: on a narrow terminal the last ones are
# dropped whole. A cut column ("127.0.0.1:180…", "in flig…") makes servers on one host look
# the same; a missing one is only missing.
COLUMNS = (
    "server",
    "state",
    "in flight",
    "done",
    "failed",
    "latency",
    "tokens",
    "retried",
    "accept len",
)
ORDER = (
    "server",
    "state",
    "in flight",
    "done",
    "failed",
    "retried",
    "tokens",
    "latency",
    "accept len",
)
SPEC = "accept len"  # the serving drafter's tokens per verify step: only a speculating fleet
GAP = 2  # between columns: rich's padding of one on each side
LAST_ERROR_MIN = 16  # narrower than this, the last error says nothing: dropped


def server_cells(s: dict[str, Any]) -> dict[str, str]:
    return {
        "server": s["url"].split("://", 1)[-1],
        "state": s["state"],
        "in flight": _in_flight(s),
        "done": str(s["completed"]),
        "failed": str(s["failed"]),
        "latency": f"{s['latency_ewma_s']:.1f}s",
        "tokens": f"{s['completion_tokens']:,}",
        "retried": str(s.get("retried", 0)),
        SPEC: f"{s['acceptance_length']:.2f}" if s.get("spec_steps") else "-",
    }


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
            for c in ORDER
            if c in shown
        ]
        if room >= LAST_ERROR_MIN:
            row.append(Text((s["last_error"] or "")[:60]))
        table.add_row(*row)
    return table
