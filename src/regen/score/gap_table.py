"""`--compare` as text (gap.py): per group tau(k) of both drafts and the paired difference,
then by depth and by position in the answer, and one line that says where the gap is."""

from __future__ import annotations

from typing import Any


def compared_lines(compared: dict[str, Any], name: str, k: int, grid: Any) -> list[str]:
    ref = compared["reference"]
    groups = {g: per_k[str(k)] for g, per_k in compared["groups"].items()}
    out = ["", f"{name} against {ref} (paired by row; difference = {name} - {ref}):"]
    out += grid(["group", "paired rows", ref, name, "difference"], _rows(groups, 2))
    out += ["", f"by depth, at k = {k}: a draft's chance to be accepted once those before were"]
    out += grid(["depth", "paired rows", ref, name, "difference"], _rows(compared["depth"], 3))
    out += ["", "by position in the answer: the first guess's agreement (top-1)"]
    out += grid(["tokens", "paired rows", ref, name, "difference"], _rows(compared["position"], 3))
    return [*out, _where(compared["where"], k)]


def _rows(cells: dict[str, dict[str, Any]], digits: int) -> list[list[str]]:
    rows = []
    for label, p in cells.items():
        if p["difference"] is None:
            rows.append([label, str(p["rows"]), "-", "-", "-"])
            continue
        half = "" if p["ci95_half_width"] is None else f" ±{p['ci95_half_width']:.{digits}f}"
        rows.append(
            [
                label,
                str(p["rows"]),
                f"{p['before']:.{digits}f}",
                f"{p['after']:.{digits}f}",
                f"{p['difference']:+.{digits}f}{half}",
            ]
        )
    return rows


def _where(where: dict[str, Any], k: int) -> str:
    parts = []
    for what, cell in (
        ("group", where["group"]),
        ("depth", where["depth"]),
        ("answer tokens", where["position"]),
    ):
        if cell is not None:
            half = cell["ci95_half_width"]
            parts.append(
                f"{what} {cell['at']} ({cell['difference']:+.3f}"
                + (f" ±{half:.3f}" if half is not None else "")
                + ")"
            )
    return f"widest gap: {', '.join(parts)}" if parts else "widest gap: no paired rows"
