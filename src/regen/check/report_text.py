"""The terminal report: the verdict first, then one block per source, then the overall block."""

from __future__ import annotations

from typing import Any

from regen.check.runner import CheckReport
from regen.finished.record import sample_label


def render_text(report: CheckReport) -> str:
    data = report.to_json()
    lines = [
        f"regen check: {data['overall']['samples']} samples, {len(data['sources'])} source(s)",
        *run_notes(data),
        "",
    ]
    for name, group in data["sources"].items():
        lines += [f"== source {name}", *_group_lines(group), ""]
    lines += ["== overall", *_group_lines(data["overall"]), ""]
    if data["error_examples"]:
        lines.append("first mask errors:")
        lines += [
            f"  {sample_label(e['id'], e['sample'])}: [{e['error']}] {e['message']}"
            for e in data["error_examples"][:5]
        ]
        lines.append("")
    lines += _composition_lines(data["composition"])
    lines.append("rules:")
    for rule in data["rules"]:
        mark = "ok  " if rule["passed"] else "FAIL"
        lines.append(
            f"  {mark} {rule['rule']:<23} {rule['fraction']:7.2%} (max {rule['max_fraction']:.2%})"
            f"  {rule['count']}/{rule['of']}  {rule['what']}"
        )
    verdict = data["verdict"].upper()
    failed = ", ".join(data["failed_rules"])
    lines += ["", f"verdict: {verdict}" + (f" (failed: {failed})" if failed else "")]
    for u in data["unfinished_runs"]:
        lines.append(f"  of {u['done']} of {u['items']} items only: {u['run']} is NOT FINISHED")
    return "\n".join(lines)


def run_notes(data: dict[str, Any]) -> list[str]:
    """What the figures below do not cover: a run not finished, lines that are not JSON."""
    lines = [f"WARNING: {u['message']}\n  hint: {u['fix']}" for u in data["unfinished_runs"]]
    bad = data["lines_not_json"]
    if bad:
        lines.append(
            f"WARNING: {bad['count']} line(s) of the shards are not JSON (a torn write, an "
            "edit): no sample, so in no rule's count\n  hint: delete each (`sed -i 'Nd' FILE` "
            "deletes line N) and run the same `regen generate` again: it answers those prompts"
        )
        lines += [f"  {b['file']} line {b['line']}: {b['error']}" for b in bad["first"][:5]]
    return lines


def _group_lines(g: dict[str, Any]) -> list[str]:
    n = g["samples"] or 1
    m, o = g["mask_sum"], g["output_tokens"]
    lines = [
        f"  samples             {g['samples']}",
        f"  mask sum            p50 {m['p50']}  p90 {m['p90']}  min {m['min']}  max {m['max']}",
        f"  mask sum <= {m['degenerate_at']:<7} {m['at_or_below']} ({m['at_or_below'] / n:.1%})",
        f"  output tokens       p50 {o['p50']}  p90 {o['p90']}  p99 {o['p99']}  max {o['max']}",
        f"  empty answers       {g['empty_answers']}",
        f"  missing reasoning   {g['reasoning_missing']['count']} of "
        f"{g['reasoning_missing']['thinking_on']} with thinking on",
        f"  truncated (length)  {g['truncated']}",
        f"  short runs (<{g['short_runs']['min_run']})    {g['short_runs']['count']}",
        f"  duplicate answers   {g['duplicate_answers']['count']}",
        f"  near-duplicates     {g['near_duplicates']}",
    ]
    others = {k: v for k, v in g["flags"].items() if k in SAMPLE_CHECKS}
    if others:
        lines.append("  flagged             " + ", ".join(f"{k} {v}" for k, v in others.items()))
    if g["too_long"]["max_length"] is not None:
        lines.append(f"  over {g['too_long']['max_length']} tokens   {g['too_long']['count']}")
    if g["token_ids"]["checked"]:
        ids = g["token_ids"]
        lines.append(f"  token-id mismatch   {ids['mismatched']} of {ids['checked']}")
    if g["errors"]:
        lines.append(
            "  mask errors         " + ", ".join(f"{k} {v}" for k, v in g["errors"].items())
        )
    if g["top_prefixes"]:
        top = "; ".join(f"{p!r} x{c}" for p, c in g["top_prefixes"][:3])
        lines.append(f"  frequent prefixes   {top}")
    cats = ", ".join(f"{k} {v}" for k, v in g["categories"].items())  # all: none left out
    lines.append(f"  categories          {cats}")
    return lines


SAMPLE_CHECKS = (
    "empty_prompt",
    "no_generation_prompt",
    "unterminated_turn",
    "reasoning_dropped",
    "tools_dropped",
    "double_reasoning",
    "repetition",
    "echo_prompt",
    "echo_system",
    "bad_tool_call",
    "broken_trace",
    "orphan_tool_result",
    "unanswered_tool_call",
    "tool_arguments_not_json",
    "tool_divergence",
)


def _composition_lines(comp: dict[str, Any] | None) -> list[str]:
    if comp is None:
        return []
    if comp["unavailable"]:
        return [f"composition: not compared ({comp['unavailable']})", ""]
    lines = [f"composition vs the prompt file (drift {comp['distance']:.1%}):"]
    for label, key in (("source", "by_source"), ("category", "by_category")):
        for name, share in comp[key].items():
            lines.append(
                f"  {label} {name:<24} prompts {share['prompts']:6.1%}  "
                f"completions {share['completions']:6.1%}"
            )
    return [*lines, ""]


def by_sample(shown: list[tuple[Any, Any, str]]) -> list[tuple[Any, Any, list[str]]]:
    """`--show`'s samples, one entry per sample with every rule it was picked for (a sample
    that breaks two rules is shown once, naming both)."""
    found: dict[tuple[str, int], tuple[Any, Any, list[str]]] = {}
    for completion, enc, rule in shown:
        entry = found.setdefault(completion.key, (completion, enc, []))
        if not rule.startswith("("):  # "(first)": picked with no rule failing
            entry[2].append(rule)
    return list(found.values())
