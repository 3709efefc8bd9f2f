"""The report as text for the terminal: a per-source table, composition, lengths, warnings."""

from __future__ import annotations

from typing import Any

COLUMNS = (
    "read",
    "converted",
    "rejected",
    "skipped",
    "deduplicated",
    "unique",
    "requested",
    "selected",
)


def render(data: dict[str, Any]) -> str:
    lines = [f"wrote {data['written']} prompts to {data['output']} (seed {data['seed']})", ""]
    lines += _table(data["sources"])
    lines.append("")
    for source in data["sources"]:
        lines += _details(source)
    for title, key in (("by source", "by_source"), ("by category", "by_category")):
        shares = data["composition"][key]
        row = ", ".join(f"{k} {v['count']} ({v['share']:.1%})" for k, v in shares.items())
        lines.append(f"composition {title}: {row or 'empty'}")
    tokens = data.get("prompt_tokens")
    if tokens and tokens.get("count"):
        lines.append(
            "prompt tokens: "
            + ", ".join(f"{k} {tokens[k]}" for k in ("min", "p50", "p90", "p99", "max", "mean"))
        )
    lines.append(f"rejects: {data['rejects'] or 'not written (give --rejects FILE to keep them)'}")
    lines += [f"WARNING: {w}" for w in data["warnings"]]
    return "\n".join(lines)


def _table(sources: list[dict]) -> list[str]:
    width = max([len("source")] + [len(s["name"]) for s in sources])
    header = f"{'source':<{width}}  {'format':<16}" + "".join(f"{c:>13}" for c in COLUMNS)
    rows = [header]
    for s in sources:
        cells = {
            **s,
            "rejected": sum(s["rejected"].values()),
            "skipped": sum(s["skipped"].values()),
        }
        rows.append(
            f"{s['name']:<{width}}  {s['format']:<16}"
            + "".join(f"{cells[c]:>13,}" for c in COLUMNS)
        )
    return rows


def _details(source: dict) -> list[str]:
    out = [f"{source['name']}: format {source['format']} ({source['format_reason']})"]
    for label, key in (
        ("rejected", "rejected"),
        ("skipped", "skipped"),
        ("non-text blocks dropped", "dropped_blocks"),
        ("duplicates of", "duplicate_of"),
    ):
        if source[key]:
            out.append(f"  {label}: " + ", ".join(f"{k} {v}" for k, v in source[key].items()))
    if source["deduplicated"]:
        out.append(f"  dedup rate: {source['dedup_rate']:.1%}")
    return out
