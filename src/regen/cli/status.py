"""`regen status RUN`: is the run alive, how far is it, when will it end."""

from __future__ import annotations

from typing import Any

import click
import orjson

from regen.cli.options import Command
from regen.display import format_duration, quality_rates_text
from regen.format.state import RunState
from regen.records import NO_SOURCE
from regen.run.outcome import end_game_line
from regen.run.parts_status import render_shards
from regen.run.status import read_status

NO_SOURCE_SAID = "prompts with no source"  # what a bare "(none)" left to guess
ENDED = {  # what a run that no process works on says of itself, by its last state
    RunState.FINISHED: "FINISHED",
    RunState.STOPPED: "NOT RUNNING (stopped)",
}


@click.command(cls=Command)
@click.argument("output_dir", metavar="RUN")  # a str: a Path folds s3://b into s3:/b
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(output_dir: str, as_json: bool) -> None:
    """Show the run RUN (a directory or a bucket URL): progress, rates, ETA, servers,
    errors, quality alarms; of a run generated in parts (`regen generate --shard I/N`),
    each part and the whole."""
    info = read_status(output_dir)
    if as_json:
        click.echo(orjson.dumps(info, option=orjson.OPT_INDENT_2).decode())
        return
    for line in render(info):
        click.echo(line)


def render(info: dict[str, Any]) -> list[str]:
    """One count of finished items (the output files), one ETA (only while it runs), server
    states only while they mean something, and the command that resumes a run that ended."""
    alive = info["alive"]
    last_state = RunState.of((info["progress"] or {}).get("state") or alive.get("state"))
    limit = trial_limit(info, last_state)
    lines = [head_line(info, last_state, limit), finished_line(info, limit)]
    if info.get("shards"):
        return [*lines, *render_shards(info["shards"], format_duration)]
    resume = info["manifest"].get("resume")
    if not alive["alive"] and last_state != RunState.FINISHED and info["eta"]["items"]:
        lines.append(f"resume with: {resume or 'the command that started it'}")
    if limit is not None:
        rest = info["manifest"].get("resume_whole") or "the same command without --limit"
        lines.append(f"the rest with: {rest}")
    progress = info["progress"]
    if progress is None:
        return [*lines, "no progress snapshot yet"]
    lines.append(f"last state: {progress['state']}, updated {alive['last_update_s_ago']}s ago")
    lines.append("rates: " + rates_text(progress["rates"]))
    if alive["alive"] or last_state == RunState.CALIBRATED:  # the time the whole would take
        lines.append(eta_line(info["eta"]))
    embedded = bool(info["manifest"]["config"].get("embedded"))
    lines += server_lines(progress["servers"], alive["alive"], embedded)
    drained = end_game_line(progress.get("end_game"))
    if drained:
        lines.append(drained)
    if progress["errors_by_type"]:
        lines.append(
            "errors by type: "
            + ", ".join(f"{k}={v}" for k, v in progress["errors_by_type"].items())
        )
    mix = progress.get("sampling_mix")
    if mix:  # --temperature 0.6,1.0 and the like: what this session's completions got
        total = sum(mix.values())
        shares = ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(mix.items()))
        lines.append(f"sampling mix (this session's {total} completions): {shares}")
    lines += tool_call_lines(progress.get("tool_calls_by_source"))
    quality = progress["quality"]
    rates_q = quality_rates_text(quality["rates"])
    lines.append(f"quality (last {quality['window']}): {rates_q}")
    lines += [f"  ALARM {a}" for a in quality["alarms"]]
    lines += [f"  event {e}" for e in progress["events"][-5:]]
    return lines


def head_line(info: dict[str, Any], last_state: RunState | None, limit: int | None) -> str:
    """Where the run is, and which process holds it (a sharded run has one per shard, each
    named on its shard's line)."""
    alive = info["alive"]
    state = "RUNNING" if alive["alive"] else ENDED.get(last_state, "NOT RUNNING (it died)")
    if last_state == RunState.CALIBRATED and not alive["alive"]:
        state = calibrated_label(info)
    missing = (info.get("shards") or {}).get("not_started")
    if missing and not alive["alive"]:  # the parts that ran may all have finished
        parts = len(missing) + len(info["shards"]["parts"])
        state = f"NOT FINISHED: {len(missing)} of {parts} shards not started"
    if limit is not None:
        state = f"FINISHED ITS --limit {limit}"
    holder = "" if info.get("shards") else f"pid {alive['pid']} on {alive['host']}; "
    return f"{info['output_dir']}: {state} ({holder}{alive['how']})"


def calibrated_label(info: dict[str, Any]) -> str:
    """A run whose last session was `regen plan --output-dir`'s sample: not started only if
    no `regen generate` answered anything before it, finished if the sample took the rest."""
    if not info["count"]["left"]:
        return "FINISHED (regen plan's calibration sample answered the last items)"
    session = (info["progress"] or {}).get("session") or {}
    if session.get("finished_before"):
        return "PAUSED (regen plan's calibration sample is in; regen generate goes on)"
    return "NOT STARTED (regen plan's calibration sample is in; regen generate goes on)"


def trial_limit(info: dict[str, Any], last_state: RunState | None) -> int | None:
    """The N of a `--limit N` trial that did its N and left the rest of the file untaken
    (None for any other run): FINISHED alone, with items left, reads as a contradiction."""
    limit = (info["progress"] or {}).get("limit")
    done = last_state == RunState.FINISHED and not info["alive"]["alive"]
    return limit if done and limit is not None and info["count"]["left"] else None


def finished_line(info: dict[str, Any], limit: int | None = None) -> str:
    """The run's one count (`regen.run.counts`): finished items from the output files, which
    are the ledger, and the unusable input lines among the errors once the input is counted."""
    count = info["count"]
    done = count["completions"] + count["errors"]
    total = done + count["left"]
    share = f" ({100 * done / total:.1f}%)" if total else ""
    unusable = count["unusable_lines"]
    of_them = f" ({unusable} of them unusable input lines)" if unusable else ""
    left = f"{count['left']} left"
    if limit is not None:
        left = f"{count['left']} not taken (--limit {limit} took the first {limit} lines)"
    return (
        f"finished: {done} of {total} items{share}: {count['completions']} completions, "
        f"{count['errors']} errors{of_them}; {left}"
    )


def rates_text(rates: dict[str, Any]) -> str:
    return ", ".join(
        f"{name} {r['completions_per_s']:.2f}/s {r['tokens_per_s']:.0f} tok/s"
        for name, r in rates.items()
    )


def eta_line(eta: dict[str, Any]) -> str:
    line = f"ETA: {format_duration(eta['seconds'])} for {eta['items']} items left"
    if eta["seconds"] is not None:
        low, high = format_duration(eta["seconds_low"]), format_duration(eta["seconds_high"])
        line += f" ({low} to {high} at the fastest and slowest recent rates)"
    return line


def _level_text(s: dict[str, Any]) -> str:
    """The level live concurrency chose (and why), or the fixed one."""
    if s.get("concurrency") is None:
        return ""  # a snapshot from before live concurrency
    if s.get("concurrency_why") == "fixed":
        return f" (fixed at {s['concurrency']})"
    return f" (level {s['concurrency']} of at most {s['concurrency_cap']}: {s['concurrency_why']})"


def _spec_text(s: dict[str, Any]) -> str:
    if not s.get("spec_steps"):
        return ""
    steps, length = s["spec_steps"], s["acceptance_length"]
    return f", drafter acceptance length {length:.2f} over {steps} verify steps"


def server_lines(servers: list[dict[str, Any]], alive: bool, embedded: bool = False) -> list[str]:
    """While the run is alive, each server's state now; after it ended, only what each did in
    the last session (a stopped run's server is not "healthy": nobody asks it anything). The
    embedded server is named as such: it was started for the run and stopped with it."""
    head = "servers:" if alive else "servers in the last session:"
    if embedded:
        head = head[:-1] + " (the embedded model's, started and stopped by the run):"
    if not servers:
        return [head[:-1] + ": none recorded"]
    lines = [head]
    for s in servers:
        head = f"{s['state']}, {s['in_flight']} in flight{_level_text(s)}, " if alive else ""
        if not alive and s.get("in_flight_at_exit"):  # sent again by the next run
            head = f"none in flight ({s['in_flight_at_exit']} were at its last update), "
        # `failed` counts attempts on this server, most of them sent again: the items lost
        # are the errors of the line above, so these never read as lost prompts
        lines.append(
            f"  {s['url']}: {head}{s['completed']} done, {s['failed']} failed attempts"
            + (f" ({s['aborted']} aborted by the engine)" if s.get("aborted") else "")
            + (f", {s['retried']} retried" if s.get("retried") else "")
            + (f", {s['withdrawn']} withdrawn as its level fell" if s.get("withdrawn") else "")
            + (f", {s['moved']} moved to a server with room" if s.get("moved") else "")
            + (f", {s['affinity_sends']} sent for their prefix" if s.get("affinity_sends") else "")
            + f", latency {s['latency_ewma_s']:.1f}s"
            + _spec_text(s)
            + (f", last error: {s['last_error']}" if s["last_error"] else "")
        )
    return lines


def tool_call_lines(by_source: dict[str, dict[str, int]] | None) -> list[str]:
    """Agent traces whose regenerated calls left the dataset's, per source (this session)."""
    if not by_source:
        return []
    counts = ", ".join(
        f"{NO_SOURCE_SAID if name == NO_SOURCE else name} {c['diverged']} of {c['compared']}"
        for name, c in by_source.items()
    )
    return [f"tool calls that differ from the dataset's (this session): {counts}"]
