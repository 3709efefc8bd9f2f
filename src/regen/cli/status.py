"""`regen status RUN`: is the run alive, how far is it, when will it end."""

from __future__ import annotations

from typing import Any

import click
import orjson

from regen.cli.options import Command
from regen.display import format_duration, summary_line
from regen.format.state import RunState
from regen.run.parts_status import render_shards
from regen.run.status import read_status

ENDED = {  # what a run that no process works on says of itself, by its last state
    RunState.FINISHED: "FINISHED",
    RunState.CALIBRATED: "NOT STARTED (regen plan's calibration sample is in; "
    "regen generate goes on)",
    RunState.STOPPED: "NOT RUNNING (stopped; run the same command to resume)",
}


@click.command(cls=Command)
@click.argument("output_dir", metavar="RUN")  # a str: a Path folds s3://b into s3:/b
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(output_dir: str, as_json: bool) -> None:
    """Show the run RUN (a directory or a bucket URL): progress, rates, ETA, servers,
    errors, quality alarms; with --shard, each shard and the whole."""
    info = read_status(output_dir)
    if as_json:
        click.echo(orjson.dumps(info, option=orjson.OPT_INDENT_2).decode())
        return
    for line in render(info):
        click.echo(line)


def render(info: dict[str, Any]) -> list[str]:
    alive = info["alive"]
    last_state = RunState.of((info["progress"] or {}).get("state") or alive.get("state"))
    if alive["alive"]:
        state = "RUNNING"
    else:
        state = ENDED.get(last_state, "NOT RUNNING (it died; run the same command to resume)")
    lines = [
        f"{info['output_dir']}: {state} (pid {alive['pid']} on {alive['host']}; {alive['how']})",
        f"files: {info['files']['completions']} completions, {info['files']['errors']} errors",
    ]
    if info.get("shards"):
        return [*lines, *render_shards(info["shards"], format_duration)]
    progress = info["progress"]
    if progress is None:
        return [*lines, "no progress snapshot yet"]
    lines.append(f"last state: {progress['state']}, updated {alive['last_update_s_ago']}s ago")
    lines.append("progress: " + summary_line(progress))
    rates = progress["rates"]
    lines.append(
        "rates: "
        + ", ".join(
            f"{name} {r['completions_per_s']:.2f}/s {r['tokens_per_s']:.0f} tok/s"
            for name, r in rates.items()
        )
    )
    eta = info["eta"]
    lines.append(
        f"ETA: {format_duration(eta['seconds'])} for {eta['items']} items left"
        + (
            f" ({format_duration(eta['seconds_low'])} to {format_duration(eta['seconds_high'])}"
            " at the fastest and slowest recent rates)"
            if eta["seconds"] is not None
            else ""
        )
    )
    for s in progress["servers"]:
        at_exit = s.get("in_flight_at_exit")
        flight = f"{s['in_flight']} in flight"
        if at_exit:  # the run is not alive: that was then, not now
            flight = f"none in flight ({at_exit} were at its last update)"
        lines.append(
            f"  {s['url']}: {s['state']}, {flight}, {s['completed']} done, "
            f"{s['failed']} failed, latency {s['latency_ewma_s']:.1f}s"
            + (f", last error: {s['last_error']}" if s["last_error"] else "")
        )
    if progress["errors_by_type"]:
        lines.append(
            "errors by type: "
            + ", ".join(f"{k}={v}" for k, v in progress["errors_by_type"].items())
        )
    quality = progress["quality"]
    rates_q = ", ".join(f"{k} {v:.1%}" for k, v in quality["rates"].items())
    lines.append(f"quality (last {quality['window']}): {rates_q}")
    lines += [f"  ALARM {a}" for a in quality["alarms"]]
    lines += [f"  event {e}" for e in progress["events"][-5:]]
    return lines
