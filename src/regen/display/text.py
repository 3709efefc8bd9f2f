"""The run's figures in words, shared by the live panel, the plain log lines and `regen
status`: durations, the one-line summary, the header a run prints first, the quality rates."""

from __future__ import annotations

from typing import Any

from regen.fleet.engine_defaults import server_default_note


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
    lines = [
        f"model       {config['model']}",
        f"servers     {servers_text(config)}: " + " ".join(config["servers"]),
        f"api key     {config.get('api_key_from', 'none')}",
        f"prompts     {config['prompts']}",
        f"output      {config['output_dir']}",
        *shard_lines(config.get("shard")),
        f"sampling    {sampling}",
        *_server_defaults(config.get("engines") or [], config["sampling"]),
        f"samples     {config['samples_per_prompt']} per prompt, "
        f"regenerate {config['regenerate_turns']} turn(s)",
    ]
    other = [m for m in batch or [] if m != config["model"]]
    if other:  # the body's model is not sent: say so rather than drop it silently
        note = f"the batch file asks for {', '.join(other)}: every request goes to the model above"
        lines.insert(1, f"            {note} (pass --model, or serve that model)")
    return lines


def shard_lines(shard: dict[str, Any] | None) -> list[str]:
    """A part of the input, and what made it one: a scheduler's variable does it unasked."""
    if shard is None:
        return []
    index, _, count = shard["part"].partition("/")
    line = (
        f"shard       {shard['part']}, from {shard['from']}: this process does part {index} "
        f"of {count} of the prompts (split by id)"
    )
    if shard["environment"]:
        line += "; --shard 0/1 does them all"
    return [line]


def servers_text(config: dict[str, Any]) -> str:
    """How many requests the fleet may hold: a cap, not what is in flight (live concurrency
    starts lower and climbs to what pays)."""
    n, per = len(config["servers"]), config["concurrency_per_server"]
    if config.get("concurrency_control", "fixed") == "fixed" or config.get("embedded"):
        return f"{n} x {per} per server (fixed), at most {n * per} at once"
    return f"{n} x at most {per} per server (live concurrency picks the level)"


def _server_defaults(engines: list[dict[str, Any]], sampling: dict[str, Any]) -> list[str]:
    """What "server default" means on each engine of the fleet (see engine_defaults), for
    the fields `sampling` leaves unset."""
    notes = list(dict.fromkeys(server_default_note(e, sampling) for e in engines))
    return [f"{'unset' if i == 0 else '':<11} {note}" for i, note in enumerate(notes)]


def resume_line(snap: dict[str, Any]) -> str | None:
    """Said once when a run resumes, so the count that starts at 10 does not look like a
    bug: "resuming: 10 of 15 already done"."""
    before = snap.get("session", {}).get("finished_before", 0)
    return f"resuming: {before} of {snap['total']} already done" if before else None


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
