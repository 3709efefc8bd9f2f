"""Tiny inline-SVG charts for the HTML report: no JavaScript, no CDN, opens offline."""

from __future__ import annotations

from html import escape

W, H, PAD = 560, 180, 28


def histogram_svg(
    edges: list[int], counts: list[int], title: str, *, mark_upto: int | None = None
) -> str:
    """Bars per power-of-two bin; bins at or below `mark_upto` are drawn in red."""
    top = max(counts) or 1
    width = (W - 2 * PAD) / len(counts)
    bars = []
    for i, (edge, count) in enumerate(zip(edges, counts, strict=True)):
        h = (H - 2 * PAD) * count / top
        x, y = PAD + i * width, H - PAD - h
        bad = mark_upto is not None and edge <= mark_upto
        label = f"{edge}+" if i + 1 == len(edges) else f"{edge}-{edges[i + 1] - 1}"
        bars.append(
            f'<rect class="{"bad" if bad else "bar"}" x="{x:.1f}" y="{y:.1f}" '
            f'width="{width - 2:.1f}" height="{h:.1f}"><title>{label}: {count}</title></rect>'
        )
        if i % 2 == 0:
            bars.append(f'<text x="{x:.1f}" y="{H - 10}" font-size="9">{edge}</text>')
    return _frame(title, "".join(bars))


def bars_svg(values: dict[str, int], title: str) -> str:
    """Horizontal bars, largest first: composition by source or category."""
    items = sorted(values.items(), key=lambda kv: -kv[1])[:12]
    top = max((v for _, v in items), default=1) or 1
    row = 18
    height = PAD + row * len(items) + 8
    parts = []
    for i, (name, value) in enumerate(items):
        y = PAD + i * row
        w = (W - 220) * value / top
        parts.append(
            f'<text x="4" y="{y + 12}" font-size="11">{escape(name[:28])}</text>'
            f'<rect class="bar" x="200" y="{y}" width="{w:.1f}" height="{row - 4}"></rect>'
            f'<text x="{204 + w:.1f}" y="{y + 12}" font-size="11">{value}</text>'
        )
    return _frame(title, "".join(parts), height)


def _frame(title: str, body: str, height: int = H) -> str:
    return (
        f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
        f'viewBox="0 0 {W} {height}" role="img" aria-label="{escape(title)}">'
        f'<text x="{PAD}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>'
        f"{body}</svg>"
    )
