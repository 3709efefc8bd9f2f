"""The report as text: one table per draft (groups by rows, tau(k) with its 95% interval),
then per-position acceptance and accepted-run histograms at the largest k asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from regen.score.gap_table import compared_lines
from regen.score.report import FEW_STEPS, ScoreReport
from regen.score.skips import skipped_lines


def render_text(report: ScoreReport) -> str:
    data = report.to_json()
    out = [f"regen score {data['run']}  (by {data['by']}; " + _sampled(data) + ")"]
    for draft in data["drafts"]:
        when = "  (scored by an earlier regen score)" if draft["earlier"] else ""
        head = f"draft {draft['name']}  ({draft['rows_file']}){when}\n{_estimate(draft)}"
        head += _target(draft.get("target_probabilities"))
        out += ["", head, *_table(draft, data["k"]), *_steps(draft, data["k"])]
        out += _detail(draft, max(data["k"]))
        out += skipped_lines(draft)
        if draft.get("engine_counters"):
            out += _counters(draft["engine_counters"])
        if draft["baseline"]:
            out += _baseline(draft["baseline"], max(data["k"]))
        if draft.get("compared"):
            out += compared_lines(draft["compared"], draft["name"], max(data["k"]), _grid)
    if len(data["drafts"]) > 1:
        out += _side_by_side(data["drafts"], max(data["k"]))
    if data["invalid_records"]:
        out.append("unreadable records: " + _counts(data["invalid_records"]))
        out += [f"  {b['file']} line {b['line']}: {b['error']}" for b in _where(data)[:5]]
    out += ["", *(f"note: {n}" for n in data["notes"])] if data["notes"] else []
    return "\n".join(out)


# how the draft draws the token it proposes, as report.py's `draft_sampling` names it
PROPOSES = {
    "probabilistic": "samples each proposal from its own distribution",
    "greedy": "proposes its most likely token (greedy)",
}


def _estimate(draft: dict[str, Any]) -> str:
    """Which estimate the figures are (score.md: greedy or sampled, at which temperature)."""
    if draft.get("estimate") is None:
        return "estimate: none (no row scored)"
    if draft.get("estimate") != "sampled":
        return "estimate: greedy (answers drawn at temperature 0)"
    temperature = draft.get("temperature")
    at = "the server's default" if temperature is None else f"temperature {temperature}"
    how = PROPOSES.get(draft.get("draft_sampling"), "proposes as its engine does")
    return f"estimate: sampled, at {at}; the draft {how}"


def _sampled(data: dict[str, Any]) -> str:
    n = data["sample_per_group"]
    return "every row" if n is None else f"{n} rows per group, seed {data['seed']}"


def _where(data: dict[str, Any]) -> list[dict[str, Any]]:
    return data.get("invalid_lines") or []  # (a score.json from before they were named)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _fmt(ratio: dict[str, Any], digits: int = 2) -> str:
    if ratio["value"] is None:
        return "-"
    if ratio["ci95"] is None:
        return f"{ratio['value']:.{digits}f}"
    half = (ratio["ci95"][1] - ratio["ci95"][0]) / 2
    return f"{ratio['value']:.{digits}f}±{half:.{digits}f}"


def _table(draft: dict[str, Any], ks: list[int]) -> list[str]:
    head = ["group", "rows", "tokens", "top-1", *(f"tau({k})" for k in ks)]
    rows = [
        [
            name,
            str(g["rows"]),
            str(g["tokens"]),
            _fmt(g["top1_match"]),
            *(_tau(at) for at in g["by_k"]),
        ]
        for name, g in draft["groups"].items()
    ]
    return _grid(head, rows)


def _tau(at: dict[str, Any]) -> str:
    """tau(k), marked when it rests on too few verify steps to go by."""
    return _fmt(at["tau"]) + ("*" if at["few_steps"] and at["tau"]["value"] is not None else "")


def _steps(draft: dict[str, Any], ks: list[int]) -> list[str]:
    """How many verify steps each tau(k) above rests on (expected steps for a sampling draft),
    and what the mark means when a figure has it."""
    head = ["verify steps", *(f"tau({k})" for k in ks)]
    rows = [
        [name, *(str(at["verify_steps"]) for at in g["by_k"])]
        for name, g in draft["groups"].items()
    ]
    marked = any(_tau(at).endswith("*") for g in draft["groups"].values() for at in g["by_k"])
    legend = [f"* from fewer than {FEW_STEPS} verify steps: too few to go by"] if marked else []
    return _grid(head, rows) + legend


def _detail(draft: dict[str, Any], k: int) -> list[str]:
    out = [f"at k={k}: acceptance rate, per-position acceptance, accepted-run histogram 0..{k}"]
    for name, g in draft["groups"].items():
        at = next(a for a in g["by_k"] if a["k"] == k)
        per_pos = " ".join("-" if p is None else f"{p:.2f}" for p in at["per_position"])
        forward = at.get("tokens_per_forward")
        out.append(
            f"  {name}: rate {_fmt(at['acceptance_rate'])}  positions [{per_pos}]  "
            f"runs {at['accepted_runs']}"
            + (f"  tokens per target forward {_fmt(forward)}" if forward else "")
        )
    return out


def _grid(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [head, *rows]
    ]


def _side_by_side(drafts: list[dict[str, Any]], k: int) -> list[str]:
    """tau(k) per draft, and beside it what drafts are compared by over the whole answer:
    answer tokens per target forward (a tau from a few steps, an n-gram's, can read high
    while most of the answer had no draft)."""
    names = list(dict.fromkeys(g for d in drafts for g in d["groups"]))
    rows = []
    for name in names:
        cells = []
        for d in drafts:
            g = d["groups"].get(name)
            at = next((a for a in g["by_k"] if a["k"] == k), None) if g else None
            forward = at.get("tokens_per_forward") if at else None
            cells += [_tau(at) if at else "-", _fmt(forward) if forward else "-"]
        rows.append([name, *cells])
    head = ["group", *(f"{d['name']} {what}" for d in drafts for what in ("tau", "tok/fwd"))]
    return [
        "",
        f"side by side at k={k}: tau, and tok/fwd = answer tokens per target forward over the "
        "whole answer (1.00 without a draft)",
        *_grid(head, rows),
    ]


def _baseline(base: dict[str, Any], k: int) -> list[str]:
    rows = []
    for name, per_k in base["groups"].items():
        p = per_k[str(k)]
        if p["difference"] is None:
            rows.append([name, str(p["rows"]), "-", "-", "-"])
            continue
        half = "" if p["ci95_half_width"] is None else f"±{p['ci95_half_width']:.2f}"
        rows.append(
            [
                name,
                str(p["rows"]),
                f"{p['before']:.2f}",
                f"{p['after']:.2f}",
                f"{p['difference']:+z.2f}{half}",  # z: never -0.00
            ]
        )
    head = ["group", "paired rows", "before", "after", "difference"]
    return [
        f"against {base['file']} ({base['draft']}), tau({k}) on the same rows:",
        *_grid(head, rows),
    ]


def _counters(counters: dict[str, dict[str, int]]) -> list[str]:
    """The engine's own sums (what its /metrics counts) behind the --from-engine table."""
    out = [
        "engine counters (vLLM /metrics: spec_decode_num_drafts, _num_draft_tokens, "
        "_num_accepted_tokens, _num_accepted_tokens_per_pos):"
    ]
    for name, c in counters.items():
        per_pos = [
            c[p]
            for p in sorted(
                (p for p in c if p.startswith("accepted_at_")),
                key=lambda p: int(p.rsplit("_", 1)[1]),
            )
        ]
        out.append(
            f"  {name}: drafts {c['num_drafts']}, draft tokens {c['num_draft_tokens']}, "
            f"accepted {c['num_accepted_tokens']}, per position {per_pos}"
        )
    return out


def _target(probs: dict[str, Any] | None) -> str:
    """Where the target's probabilities came from, with --target-model (target_probs.py)."""
    if probs is None:
        return ""
    gguf = Path(probs["teacher_forced"]["target"].removeprefix("gguf:").rsplit(":", 2)[0]).name
    return (
        f"\ntarget probabilities: a teacher-forced pass of {gguf} for "
        f"{_whole(probs['teacher_forced']['rows'])}, the engine's logprobs for "
        f"{_whole(probs['engine_logprobs']['rows'])}"
    )


def _whole(rows: int) -> str:
    return f"{rows} row" + ("" if rows == 1 else "s")
