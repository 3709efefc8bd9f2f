"""The plan as a person reads it."""

from __future__ import annotations

from typing import Any

from regen.display import format_duration


def plan_lines(data: dict[str, Any], prompts_path: str) -> list[str]:
    cal, ans = data["calibration"], data["answer_tokens"]
    lines = [
        f"prompts      {data['prompts']:,} in {prompts_path} ({data['bad_lines']} unusable lines)"
        f", {data['samples_per_prompt']} sample(s) each: {data['completions']:,} completions",
        f"calibration  {cal['prompts']} prompts from {cal['strata']} strata "
        f"(--sample-seed {cal['seed']}) in {format_duration(cal['seconds'])}: "
        f"{cal['completions']} answers, {cal['failed']} failed",
        f"answers      mean {ans['mean']:.0f} tokens, P50 {ans['p50']:.0f}, P90 {ans['p90']:.0f}, "
        f"max {ans['max']:.0f}; {ans['hit_max_tokens_share']:.1%} hit max tokens",
    ]
    for s in data["servers"]:
        lines.append(
            f"  {s['url']}: {s['completions_per_second']:.2f} compl/s "
            f"{s['output_tokens_per_second']:.0f} tok/s, latency mean {s['latency_mean_s']:.1f}s "
            f"P90 {s['latency_p90_s']:.1f}s ({s['completions']} answers)"
            + ("  SLOWER than the others" if s["slower"] else "")
        )
    short = [s for s in data["servers"] if s["slots"] < s["concurrency"]]
    if short:
        held = ", ".join(f"{s['slots']} on {s['url']}" for s in short)
        lines.append(
            f"  in flight: the calibration kept {held} (not the {short[0]['concurrency']} slots "
            "per server): the figures hold for that many; a larger --sample (the default fills "
            "every slot twice) measures full servers"
        )
    lines += [
        f"fleet        {data['completions_per_second']:.2f} compl/s, "
        f"{data['output_tokens_per_second']:.0f} output tok/s",
        f"estimate     {format_duration(data['wall_seconds'])} "
        f"(P10 {format_duration(data['wall_seconds_p10'])}, "
        f"P90 {format_duration(data['wall_seconds_p90'])}), "
        f"{data['output_tokens']:,} output tokens",
    ]
    if abs(cal["overhead_factor"] - 1) > 0.2:
        slower = cal["overhead_factor"] > 1
        why = "client or fleet stalls" if slower else "answers overlapped more than modelled"
        lines.append(
            f"overhead     the calibration took {cal['overhead_factor']:.2f}x the time its "
            f"answers' latencies account for ({why}); the estimate includes it"
        )
    if data["cost_usd"] is None:
        lines.append("cost         give --gpu-hour-cost (and --gpus-per-server) to price it")
    else:
        low, high = data["cost_usd_p10_p90"]
        lines.append(f"cost         ${data['cost_usd']:,.2f} (P10 ${low:,.2f}, P90 ${high:,.2f})")
    if data["slower_servers"]:
        lines.append("slower       " + ", ".join(data["slower_servers"]))
    left = data["remaining"]
    if left is not None:
        lines.append(
            f"kept         {cal['completions'] + cal['failed']} records in {cal['kept_in']}; "
            f"regen generate with the same flags does the other {left['items']:,} "
            f"(about {format_duration(left['wall_seconds'])})"
        )
    return lines


def sweep_lines(data: dict[str, Any]) -> list[str]:
    lines = ["concurrency  output tok/s  mean latency"]
    for level in data["levels"]:
        mark = "  <- recommended" if level["concurrency"] == data["recommended"] else ""
        lines.append(
            f"{level['concurrency']:>11}  {level['output_tokens_per_second']:>12.0f}  "
            f"{level['latency_mean_s']:>11.1f}s{mark}"
        )
    lines.append(f"recommended: --concurrency-per-server {data['recommended']} (the most output)")
    knee = data.get("knee")
    if knee is not None and knee != data["recommended"]:
        by = {level["concurrency"]: level for level in data["levels"]}
        most, low = by[data["recommended"]], by[knee]
        lost = 1 - low["output_tokens_per_second"] / max(most["output_tokens_per_second"], 1e-9)
        lines.append(
            f"trade-off: {knee} answers each request in {low['latency_mean_s']:.1f}s instead of "
            f"{most['latency_mean_s']:.1f}s for {lost:.0%} less output; a batch job wants the "
            "output (without --fixed-concurrency, generate finds each server's level live)"
        )
    return lines


def from_run_lines(data: dict[str, Any]) -> list[str]:
    lines = [
        f"{data['output_dir']}: {data['finished']:,} of {data['items']:,} items finished, "
        f"{data['remaining']:,} left "
        f"({data['state'] or 'no snapshot'})",
        _time_left(data),
    ]
    if data["cost_usd"] is not None:
        lines.append(f"cost left    ${data['cost_usd']:,.2f}")
    return lines


def _time_left(data: dict[str, Any]) -> str:
    if data["remaining"] == 0:
        return "time left    none: every item is finished"
    if data["wall_seconds"] is None:
        return "time left    unknown: no answer in the recent rate windows to time it by"
    return (
        f"time left    {format_duration(data['wall_seconds'])} "
        f"(P10 {format_duration(data['wall_seconds_p10'])}, "
        f"P90 {format_duration(data['wall_seconds_p90'])})"
    )
