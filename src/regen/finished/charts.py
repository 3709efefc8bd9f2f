"""The HTML report's charts: matplotlib figures saved as SVG and inlined (no JavaScript, no
network, opens offline). Axes carry their units, bars their counts, and a rule's threshold is
drawn as a line, so a chart says what the rule counts rather than painting whole bins."""

from __future__ import annotations

import io
import math
import re

from matplotlib import rc_context
from matplotlib.figure import Figure

BLUE, RED = "#4a78b5", "#c8372d"
RC = {"svg.fonttype": "none", "svg.hashsalt": "regen", "font.size": 9}  # text stays text


def _svg(fig: Figure, label: str) -> str:
    buf = io.StringIO()
    with rc_context(RC):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML prolog and doctype: inlined in HTML
    return re.sub(r"<svg ", f'<svg class="plot" role="img" aria-label="{label}" ', text, count=1)


def _log_bins(values: list[int]) -> list[float]:
    """Powers of two from 1 to just past the largest value: a spike of 6-token masks and a
    tail of 16K-token answers both show, and the axis ends where the data ends."""
    top = max(max(values, default=1), 1)
    return [0, *(2.0**k for k in range(math.ceil(math.log2(top + 1)) + 1))]


def histogram_svg(values: list[int], title: str, xlabel: str, threshold: int | None = None) -> str:
    """Counts per power-of-two bin, each bar labelled; `threshold` drawn as a dashed line."""
    fig = Figure(figsize=(6.2, 2.6))
    ax = fig.add_subplot()
    bins = _log_bins(values)
    counts, edges, bars = ax.hist(values, bins=bins, color=BLUE, edgecolor="white")
    ax.bar_label(bars, labels=[str(int(c)) if c else "" for c in counts], fontsize=7)
    ax.set_xscale("symlog", base=2, linthresh=1, linscale=0.5)
    ax.set_xlim(0, edges[-1])
    step = math.ceil(len(edges) / 8)  # at most 8 labels: they must not overlap
    ticks = [int(e) for e in edges[::step]]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_title(title, loc="left", fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("samples")
    if threshold is not None:
        at_or_below = sum(1 for v in values if v <= threshold)
        ax.axvline(
            threshold + 0.5,
            color=RED,
            linestyle="--",
            linewidth=1.2,
            label=f"≤ {threshold}: {at_or_below} samples",
        )
        # beside the plot, never over the bars
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, title)


def bars_svg(values: dict[str, int], title: str, top: int = 15) -> str:
    """Horizontal bars, largest first, full labels, counts at the bar ends."""
    items = sorted(values.items(), key=lambda kv: -kv[1])[:top][::-1]
    fig = Figure(figsize=(6.2, 0.6 + 0.28 * max(len(items), 1)))
    ax = fig.add_subplot()
    bars = ax.barh([k for k, _ in items], [v for _, v in items], color=BLUE)
    ax.bar_label(bars, padding=3, fontsize=8)
    ax.set_title(title, loc="left", fontsize=10)
    ax.set_xlabel("samples")
    ax.margins(x=0.12)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, title)


def lengths_by_source_svg(lengths: dict[str, list[int]], title: str) -> str:
    """One box per source (median, quartiles, 5th-95th percentile whiskers), on a log axis."""
    names = sorted(lengths, key=lambda n: -len(lengths[n]))[:15][::-1]
    fig = Figure(figsize=(6.2, 0.8 + 0.3 * max(len(names), 1)))
    ax = fig.add_subplot()
    data = [[max(v, 1) for v in lengths[n]] or [1] for n in names]
    ax.boxplot(data, orientation="horizontal", whis=(5, 95), showfliers=False, widths=0.6)
    ax.set_yticks(range(1, len(names) + 1), [f"{n} ({len(lengths[n])})" for n in names])
    ax.set_xscale("log")
    ax.set_title(title, loc="left", fontsize=10)
    ax.set_xlabel("output tokens (final turn)")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, title)
