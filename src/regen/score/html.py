"""The acceptance section of `check`'s HTML report, from a run's RUN/score/score.json:
per-group tau(k) bars with their 95% intervals, and per-position acceptance curves, drawn
with matplotlib as check's other charts are (inline SVG, no JavaScript)."""

from __future__ import annotations

from html import escape
from typing import Any

import orjson
from matplotlib.figure import Figure

from regen.finished.charts import BLUE, _svg
from regen.finished.score_place import score_json_of, score_where

OVERALL = "(overall)"


def acceptance_section(runs: list[str]) -> str:
    """The section for the first run that has a score; "" when none has (nothing to show)."""
    for run in runs:
        path = score_json_of(run)
        if path is not None:
            return render_section(
                orjson.loads(path.read_bytes()), f"{score_where(run)}/{path.name}"
            )
    return ""


def render_section(score: dict[str, Any], where: str) -> str:
    k = max(score["k"])
    parts = [
        f"<h2>Acceptance (regen score, k={k})</h2>",
        f"<p>From {escape(where)}, grouped by {escape(score['by'])}.</p>",
    ]
    charts = []
    for draft in score["drafts"]:
        groups = draft["groups"]
        charts.append(tau_bars_svg(groups, k, f"tau({k}) by {score['by']}, draft {draft['name']}"))
        charts.append(positions_svg(groups, k, f"Acceptance per draft position, {draft['name']}"))
    parts.append(f"<div class='plots'>{''.join(charts)}</div>")
    parts += [f"<p>{escape(note)}</p>" for note in score.get("notes", [])]
    return "".join(parts)


def _at(group: dict[str, Any], k: int) -> dict[str, Any]:
    return next(at for at in group["by_k"] if at["k"] == k)


def tau_bars_svg(groups: dict[str, dict[str, Any]], k: int, title: str) -> str:
    names = [n for n in groups if _at(groups[n], k)["tau"]["value"] is not None][::-1]
    taus = [_at(groups[n], k)["tau"] for n in names]
    values = [t["value"] for t in taus]
    spans = [t["ci95"] or [t["value"], t["value"]] for t in taus]  # one row: no interval
    errors = [
        [v - lo for v, (lo, _) in zip(values, spans, strict=True)],
        [hi - v for v, (_, hi) in zip(values, spans, strict=True)],
    ]
    fig = Figure(figsize=(6.2, 0.8 + 0.3 * max(len(names), 1)))
    ax = fig.add_subplot()
    bars = ax.barh(
        [f"{n} ({groups[n]['rows']})" for n in names], values, xerr=errors, color=BLUE, capsize=3
    )
    ax.bar_label(bars, labels=[f"{v:.2f}" for v in values], padding=3, fontsize=8)
    ax.set_xlim(0, k + 1.3)
    ax.axvline(k + 1, color="#888", linestyle=":", linewidth=1)  # the most a step can emit
    ax.set_title(title, loc="left", fontsize=10)
    ax.set_xlabel("tokens per verify step (bonus included; bar: 95% interval)")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, title)


def positions_svg(groups: dict[str, dict[str, Any]], k: int, title: str) -> str:
    fig = Figure(figsize=(6.2, 2.6))
    ax = fig.add_subplot()
    for name, group in groups.items():
        rates = _at(group, k)["per_position"]
        ax.plot(
            range(1, k + 1),
            [r if r is not None else float("nan") for r in rates],
            marker="o",
            linewidth=2.2 if name == OVERALL else 1.2,
            label=name,
        )
    ax.set_xticks(range(1, k + 1))
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("draft position in a verify step")
    ax.set_ylabel("accepted")
    ax.set_title(title, loc="left", fontsize=10)
    ax.legend(loc="upper right", frameon=False, fontsize=7)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, title)
