"""A self-contained HTML page: verdict, rules table, charts (matplotlib SVG, inlined),
per-source table and composition. It fits a 1280 px window: wide tables scroll in their box."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from html import escape
from typing import Any

from regen import __version__
from regen.check.report_text import by_sample
from regen.check.runner import CheckReport
from regen.check.show import render_sample
from regen.finished.charts import bars_svg, histogram_svg, lengths_by_source_svg
from regen.finished.record import sample_label
from regen.run.status import model_of

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
.pass{color:#176d2c}.fail{color:#b3261e}
.box{max-width:100%;overflow-x:auto;margin:.5em 0 1.5em}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px}
th{background:#f3f3f3;text-align:left}td{text-align:right}td.what,td.rule{text-align:left}td.count{white-space:nowrap}
td.text{text-align:left;max-width:16em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
th.name{max-width:16em}
.plots{display:flex;flex-wrap:wrap;gap:12px}
svg.plot{border:1px solid #eee;background:#fff;max-width:100%;height:auto}
#about th{width:12em}#about td{text-align:left;overflow-wrap:anywhere}
.sample pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f8f8f8;padding:.5em}
"""


def render_html(
    report: CheckReport, about: dict[str, str] | None = None, acceptance: str = ""
) -> str:
    """`about`: what was judged (runs, tokenizer, model, template hash, date, version), for a
    report handed on without the command that made it. `acceptance`: the section `regen score`
    draws (regen.score.html), when the run has one."""
    data = report.to_json()
    verdict = data["verdict"]
    overall = data["overall"]
    failed = ", ".join(data["failed_rules"]) or "none"
    return "".join(
        [
            "<!DOCTYPE html><html><head><meta charset='utf-8'><title>regen check report</title>",
            f"<style>{STYLE}</style></head><body><h1>regen check</h1>",
            f"<p id='verdict' class='{verdict}'><b>Verdict: {verdict.upper()}</b>",
            f" (failed rules: {escape(failed)}) - {overall['samples']} samples</p>",
            _warnings(data),
            _about(about or {}),
            _rules_table(data["rules"]),
            _failing(report),
            f"<div class='plots'>{''.join(_charts(report))}</div>",
            "<h2>By source</h2>",
            _groups_table({**data["sources"], "(overall)": overall}),
            _composition(data["composition"]),
            acceptance,
            _errors(data["error_examples"]),
            "</body></html>",
        ]
    )


def _warnings(data: dict) -> str:
    """Before any figure: what the figures do not cover (a run not finished, lines that
    are not JSON), as the text report says it."""
    items = [
        f"<li><b>{escape(u['message'])}</b>; {escape(u['fix'])}</li>"
        for u in data["unfinished_runs"]
    ]
    bad = data["lines_not_json"]
    if bad:
        places = ", ".join(f"{b['file']} line {b['line']}" for b in bad["first"][:5])
        items.append(
            f"<li><b>{bad['count']} line(s) are not JSON</b> (no sample, in no rule's count): "
            f"{escape(places)}</li>"
        )
    return f"<ul id='warnings' class='fail'>{''.join(items)}</ul>" if items else ""


def _charts(report: CheckReport) -> list[str]:
    overall = report.overall
    return [
        histogram_svg(
            overall.mask_sums,
            "Loss-mask sum per sample, all sources",
            "supervised tokens",
            threshold=overall.opts.degenerate_at,
        ),
        histogram_svg(overall.output_tokens, "Output length, all sources", "tokens (final turn)"),
        lengths_by_source_svg(
            {name: g.output_tokens for name, g in report.sources.items()},
            "Output length by source (box: quartiles, whiskers: 5th-95th percentile)",
        ),
        bars_svg({name: g.samples for name, g in report.sources.items()}, "Samples by source"),
        bars_svg(dict(overall.categories), "Samples by category"),
    ]


def _rules_table(rules: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr class='{'pass' if r['passed'] else 'fail'}'><td class='rule'>{r['rule']}</td>"
        f"<td>{'ok' if r['passed'] else 'FAIL'}</td><td>{r['fraction']:.2%}</td>"
        f"<td>{r['max_fraction']:.2%}</td><td class='count'>{r['count']} / {r['of']}</td>"
        f"<td class='what'>{escape(r['what'])}</td></tr>"
        for r in rules
    )
    head = "<tr><th>rule</th><th></th><th>value</th><th>max</th><th>count</th><th>meaning</th>"
    return f"<h2>Rules</h2><div class='box'><table>{head}</tr>{rows}</table></div>"


def _groups_table(groups: dict[str, dict[str, Any]]) -> str:
    cols = [
        ("samples", lambda g: g["samples"]),
        ("mask p50", lambda g: g["mask_sum"]["p50"]),
        ("mask ≤ thr.", lambda g: g["mask_sum"]["at_or_below"]),
        ("output p50/p90/p99", lambda g: "{p50}/{p90}/{p99}".format(**g["output_tokens"])),
        ("empty", lambda g: g["empty_answers"]),
        ("no reasoning", lambda g: g["reasoning_missing"]["count"]),
        ("truncated", lambda g: g["truncated"]),
        ("dupes", lambda g: g["duplicate_answers"]["count"]),
        ("near dupes", lambda g: g["near_duplicates"]),
        ("short runs", lambda g: g["short_runs"]["count"]),
        ("mask errors", lambda g: sum(g["errors"].values())),
    ]
    head = "".join(f"<th>{escape(c)}</th>" for c, _ in cols)
    rows = "".join(
        f"<tr><th class='name'>{_breakable(name)}</th>"
        + "".join(f"<td>{escape(str(f(g)))}</td>" for _, f in cols)
        + f"<td class='text' title='{escape(_prefix(g))}'>{escape(_prefix(g))}</td></tr>"
        for name, g in groups.items()
    )
    table = f"<table><tr><th>source</th>{head}<th>top prefix</th></tr>{rows}</table>"
    return f"<div class='box'>{table}</div>"


def _prefix(g: dict[str, Any]) -> str:
    return g["top_prefixes"][0][0] if g["top_prefixes"] else ""


def _composition(comp: dict[str, Any] | None) -> str:
    if comp is None:
        return ""
    if comp["unavailable"]:
        return f"<p>Composition not compared: {escape(comp['unavailable'])}</p>"
    rows = "".join(
        f"<tr><th class='name'>{label} {_breakable(n)}</th><td>{v['prompts']:.1%}</td>"
        f"<td>{v['completions']:.1%}</td></tr>"
        for label, key in (("source", "by_source"), ("category", "by_category"))
        for n, v in comp[key].items()
    )
    head = "<tr><th>mix</th><th>prompt file</th><th>completions</th></tr>"
    return (
        f"<h2>Composition (drift {comp['distance']:.1%})</h2>"
        f"<div class='box'><table>{head}{rows}</table></div>"
    )


def _errors(examples: list[dict[str, Any]]) -> str:
    if not examples:
        return ""
    items = "".join(
        f"<li>{escape(sample_label(e['id'], e['sample']))}: [{escape(e['error'])}] "
        f"{escape(e['message'])}</li>"
        for e in examples
    )
    return f"<h2>Mask errors (first {len(examples)})</h2><ul>{items}</ul>"


def _about(about: dict[str, str]) -> str:
    if not about:
        return ""
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in about.items())
    return f"<h2>What was judged</h2><div class='box'><table id='about'>{rows}</table></div>"


def _failing(report: CheckReport) -> str:
    """The failing samples as `--show` prints them: one block per sample, all its rules,
    the supervised text between ⟦ ⟧."""
    samples = [s for s in by_sample(report.shown) if s[2]]
    if not samples:
        return ""
    blocks = "".join(
        f"<div class='sample' data-id='{escape(c.id)}' data-sample='{c.sample}'>"
        f"<h3>{escape(c.label)}</h3>"
        f"<p>rules broken: <b>{escape(', '.join(rules))}</b></p>"
        f"<pre>{escape(render_sample(c, enc, color=False))}</pre></div>"
        for c, enc, rules in samples
    )
    return f"<h2>Failing samples ({len(samples)})</h2><div id='failing'>{blocks}</div>"


def about_check(runs: Sequence[str], tokenizer: str, chat_template: str | None) -> dict[str, str]:
    """The header of a report handed on: what was judged, with what, when, by which regen."""
    models = sorted({m for m in (model_of(r) for r in runs) if m})
    digest = hashlib.sha256((chat_template or "").encode()).hexdigest()[:16]
    return {
        "runs": ", ".join(runs),
        "tokenizer": tokenizer,
        "generated with": ", ".join(models) or "unknown (no manifest)",
        "chat template": f"sha256 {digest}" if chat_template else "none",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "regen": __version__,
    }


def _breakable(name: str) -> str:
    """A long source name may wrap after / - _ . but never inside a word."""
    text = escape(name)
    for mark in "/-_.":
        text = text.replace(mark, f"{mark}<wbr>")
    return text
