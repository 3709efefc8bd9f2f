"""A self-contained HTML page: verdict, rules table, plots (inline SVG), per-source tables."""

from __future__ import annotations

from html import escape
from typing import Any

from regen.check.runner import CheckReport
from regen.check.svg import bars_svg, histogram_svg

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
.pass{color:#176d2c}.fail{color:#b3261e}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px}
th{background:#f3f3f3;text-align:left}.plots{display:flex;flex-wrap:wrap;gap:12px}
.bar{fill:#4a78b5}.bad{fill:#c8372d}svg.plot{border:1px solid #eee;background:#fff}
"""


def render_html(report: CheckReport) -> str:
    data = report.to_json()
    verdict = data["verdict"]
    overall = data["overall"]
    plots = [
        histogram_svg(
            overall["mask_sum"]["histogram"]["edges"],
            overall["mask_sum"]["histogram"]["counts"],
            "Loss-mask sum per sample (tokens, all sources)",
            mark_upto=overall["mask_sum"]["degenerate_at"],
        ),
        bars_svg({k: v["samples"] for k, v in data["sources"].items()}, "Samples by source"),
        bars_svg(overall["categories"], "Samples by category"),
    ]
    plots += [
        histogram_svg(
            g["output_tokens"]["histogram"]["edges"],
            g["output_tokens"]["histogram"]["counts"],
            f"Output length (tokens), source {name}",
        )
        for name, g in data["sources"].items()
    ]
    failed = ", ".join(data["failed_rules"]) or "none"
    return "".join([
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>regen check report</title>",
        f"<style>{STYLE}</style></head><body><h1>regen check</h1>",
        f"<p id='verdict' class='{verdict}'><b>Verdict: {verdict.upper()}</b>",
        f" (failed rules: {escape(failed)}) - {overall['samples']} samples</p>",
        _rules_table(data["rules"]),
        f"<div class='plots'>{''.join(plots)}</div>",
        "<h2>By source</h2>",
        _groups_table({**data["sources"], "(overall)": overall}),
        _errors(data["error_examples"]),
        "</body></html>",
    ])  # fmt: skip


def _rules_table(rules: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr class='{'pass' if r['passed'] else 'fail'}'><td>{r['rule']}</td>"
        f"<td>{'ok' if r['passed'] else 'FAIL'}</td><td>{r['fraction']:.2%}</td>"
        f"<td>{r['max_fraction']:.2%}</td><td>{r['count']} / {r['of']}</td>"
        f"<td>{escape(r['what'])}</td></tr>"
        for r in rules
    )
    head = "<tr><th>rule</th><th></th><th>value</th><th>max</th><th>count</th><th>meaning</th>"
    return f"<h2>Rules</h2><table>{head}</tr>{rows}</table>"


def _groups_table(groups: dict[str, dict[str, Any]]) -> str:
    cols = [
        ("samples", lambda g: g["samples"]),
        ("mask p50", lambda g: g["mask_sum"]["p50"]),
        ("mask ≤ threshold", lambda g: g["mask_sum"]["at_or_below"]),
        ("output p50/p90/p99", lambda g: "{p50}/{p90}/{p99}".format(**g["output_tokens"])),
        ("empty answers", lambda g: g["empty_answers"]),
        ("missing reasoning", lambda g: g["reasoning_missing"]["count"]),
        ("truncated", lambda g: g["truncated"]),
        ("duplicates", lambda g: g["duplicate_answers"]["count"]),
        ("short runs", lambda g: g["short_runs"]["count"]),
        ("mask errors", lambda g: sum(g["errors"].values())),
        ("top prefix", lambda g: g["top_prefixes"][0][0] if g["top_prefixes"] else ""),
    ]
    head = "".join(f"<th>{escape(c)}</th>" for c, _ in cols)
    rows = "".join(
        f"<tr><th>{escape(name)}</th>"
        + "".join(f"<td>{escape(str(f(g)))}</td>" for _, f in cols)
        + "</tr>"
        for name, g in groups.items()
    )
    return f"<table><tr><th>source</th>{head}</tr>{rows}</table>"


def _errors(examples: list[dict[str, Any]]) -> str:
    if not examples:
        return ""
    items = "".join(
        f"<li>{escape(e['id'])}: [{escape(e['error'])}] {escape(e['message'])}</li>"
        for e in examples
    )
    return f"<h2>Mask errors (first {len(examples)})</h2><ul>{items}</ul>"
