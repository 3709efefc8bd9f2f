"""What bench_drafter.py reports for each drafter: tau(k) per domain with the 95% interval
between held-out rows (from `regen score`), the rows and verify steps behind it, the steps and
supervised tokens it was trained on, and its difference from its baseline on the same rows:
a paired bootstrap over the held-out rows, so the rows' own spread (which the two drafters
share) does not hide a real difference, or make a tiny one look real.

Below MIN_ROWS held-out rows a domain, or MIN_STEPS training steps, the table says that the
comparison means nothing: with 6 held-out rows the original-answer drafter "won" 1.097 to
1.085 (issue 54), inside an interval of about ±0.05.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

MIN_ROWS = 30  # held-out rows a domain under which a per-domain figure is noise
MIN_STEPS = 20  # training steps under which the drafter has hardly moved from its init
BOOTSTRAP = 2000  # resamples of the held-out rows for a difference's interval


def scored(score_dir: Path, k: int) -> dict[str, dict]:
    """{draft name: {"groups": {group: {...}}, "rows": {(id, sample): (group, tokens,
    steps)}}} from one `regen score -o DIR`: the figures and each row's own count."""
    report = json.loads((score_dir / "score.json").read_text())
    out = {}
    for draft in report["drafts"]:
        groups = {}
        for group, g in draft["groups"].items():
            by_k = next(b for b in g["by_k"] if b["k"] == k)
            groups[group] = {
                "rows": g["rows"],
                "tokens": g["tokens"],
                "top1": g["top1_match"]["value"],
                "tau": by_k["tau"]["value"],
                "ci95": by_k["tau"]["ci95"],
                "verify_steps": by_k["verify_steps"],
            }
        out[draft["name"]] = {"groups": groups, "rows": _rows(Path(draft["rows_file"]), k)}
    return out


def _rows(rows_file: Path, k: int) -> dict[tuple[str, int], tuple[str, int, float]]:
    """Per held-out row: its group, the answer tokens a verify step can emit (all but the
    prefill's first) and its verify steps at k, from the row's own tau."""
    rows = {}
    for line in rows_file.read_text().splitlines():
        r = json.loads(line)
        if "skipped" in r or not r.get("tau"):
            continue
        emitted = r["tokens"] - 1
        rows[(r["id"], r["sample"])] = (r["groups"]["category"], emitted, emitted / r["tau"][k - 1])
    return rows


def paired_difference(
    ours: dict, theirs: dict, group: str | None, seed: int = 0
) -> dict[str, float | int]:
    """tau(ours) - tau(theirs) pooled over the rows both scored (of one group, or all), with
    a 95% interval from resampling those rows (the same resample for both drafters)."""
    keys = sorted(k for k in ours if k in theirs and (group is None or ours[k][0] == group))
    if not keys:
        return {"rows": 0}

    def tau(rows: dict, picked: list) -> float:
        return sum(rows[k][1] for k in picked) / max(1e-9, sum(rows[k][2] for k in picked))

    rng = random.Random(seed)
    diffs = sorted(
        tau(ours, pick) - tau(theirs, pick)
        for pick in ([rng.choice(keys) for _ in keys] for _ in range(BOOTSTRAP))
    )
    return {
        "rows": len(keys),
        "diff": tau(ours, keys) - tau(theirs, keys),
        "low": diffs[int(0.025 * BOOTSTRAP)],
        "high": diffs[int(0.975 * BOOTSTRAP) - 1],
    }


def verdict(diffs: list[dict]) -> str:
    """Over the seeds: better or worse only when every seed's interval is clear of 0."""
    if not diffs or any(d.get("rows", 0) == 0 for d in diffs):
        return "not scored"
    if all(d["low"] > 0 for d in diffs):
        return "better"
    if all(d["high"] < 0 for d in diffs):
        return "worse"
    return "no clear difference"


def warnings(entries: list[dict]) -> list[str]:
    """What makes a figure mean nothing: too few held-out rows in a domain (once per
    held-out set: every drafter is scored on the same rows), too few training steps."""
    said = {}
    for e in entries:
        groups = e["groups"]
        small = {g: v["rows"] for g, v in groups.items() if g[0] != "(" and v["rows"] < MIN_ROWS}
        if small:
            said[e["held"]] = (
                f"warning: {e['held']}: {', '.join(f'{g} {n}' for g, n in sorted(small.items()))}"
                f" held-out rows (under {MIN_ROWS} a domain): those domains' figures and "
                "differences mean nothing; hold out more prompts (--held)"
            )
    few = sorted(
        {
            f"{e['kind']} {e['set']} s{e['seed']} ({e['training']['steps']})"
            for e in entries
            if e["set"] != "init" and e["training"]["steps"] < MIN_STEPS
        }
    )
    if few:
        said["steps"] = (
            f"warning: trained under {MIN_STEPS} steps, hardly away from their init (raise "
            f"--budget): {', '.join(few)}"
        )
    return list(said.values())


def cell(g: dict) -> str:
    low, high = g["ci95"]
    return f"{g['tau']:.2f} [{low:.2f}, {high:.2f}]"


def diff_cell(d: dict) -> str:
    if not d.get("rows"):
        return "-"
    return f"{d['diff']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]"


def table(results: list[dict], k: int) -> str:
    """One markdown table: a line per drafter kind, training set and seed."""
    domains = sorted({g for r in results for g in r["groups"] if g != "(overall)"} or {"(overall)"})
    head = (
        ["drafter", "trained on", "seed", "rows / prompts", "steps", "passes"]
        + [f"{d} tau({k})" for d in domains]
        + [f"overall tau({k})", "verify steps", "vs baseline (paired)"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        t = r["training"]
        cells = [
            r["kind"],
            r["set"],
            str(r["seed"]),
            f"{t['rows']} / {t['prompts']}",
            str(t["steps"]),
            f"{t['passes']:.1f}",
            *(cell(r["groups"][d]) if d in r["groups"] else "-" for d in domains),
            cell(r["groups"]["(overall)"]),
            str(r["groups"]["(overall)"]["verify_steps"]),
            f"{diff_cell(r['vs'])} vs {r['baseline']}" if r["set"] != r["baseline"] else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
