"""A blend from what the drafter lacks (issue 57, item 3): where would more data pay most?

From two trainings of the same drafter on the balanced blend, at the budget B and at B/2, each
domain's tau(k) on pool prompts that trained neither (not the held-out rows that then judge
the blend: its weights would be fitted to them) gives a learning curve through two points.
Taken as tau_d = a_d + b_d ln(n_d), with n_d the domain's supervised tokens, the blend that
maximises the held-out mix's tau at a fixed total (sum of w_d tau_d with sum n_d = B, w_d
the domain's share of what is served) gives each domain tokens in proportion to w_d b_d:
feed the domains that are still learning, not the ones that score lowest. A domain whose
curve is flat or falling keeps a floor share, since two points from small trainings are noisy.

The recipe is a `regen prepare` file the user can read: each weight with the slope and the
two scores it came from, in comments.
"""

from __future__ import annotations

import math
from pathlib import Path

from regen.finished.score_rows import read_rows
from regen.score.outcome import from_line
from regen.score.tally import Tally

FLOOR = 0.10  # the least share a domain keeps, whatever its slope


def tau_outside(rows_file: Path, trained: set[str], k: int) -> dict[str, float]:
    """tau(k) per domain over a `regen score` rows file's rows whose prompt is not in
    `trained`, folded by regen's own maths (the figure score.json gives a group)."""
    tallies: dict[str, Tally] = {}
    for line in read_rows(rows_file):
        outcome = from_line(line)
        if outcome is None or line["id"] in trained:
            continue
        tallies.setdefault(line["groups"]["category"], Tally(k)).add(outcome)
    return {d: t.by_k[k - 1].tau.value for d, t in tallies.items() if t.rows}


def slopes(low: dict[str, float], high: dict[str, float]) -> dict[str, float]:
    """b_d per domain: tau(k) gained per doubling of its tokens, over ln 2."""
    return {d: (high[d] - low[d]) / math.log(2) for d in high if d in low}


def weights(
    low: dict[str, float], high: dict[str, float], served: dict[str, float] | None = None
) -> dict[str, float]:
    """The share of each domain (summing to 1): w_d b_d, the flat ones at FLOOR."""
    b = slopes(low, high)
    served = served or dict.fromkeys(b, 1.0 / len(b))
    raw = {d: max(0.0, served[d] * b[d]) for d in b}
    if not any(raw.values()):  # nothing is learning: keep what is served
        return {d: served[d] / sum(served.values()) for d in b}
    floored = [d for d in b if raw[d] / sum(raw.values()) < FLOOR]
    rest = 1.0 - FLOOR * len(floored)
    growing = sum(v for d, v in raw.items() if d not in floored)
    return {d: FLOOR if d in floored else rest * raw[d] / growing for d in b}


def recipe_comments(low: dict[str, float], high: dict[str, float], k: int) -> list[str]:
    """The lines above the recipe that say where each weight came from."""
    b = slopes(low, high)
    lines = [
        f"# weights from what the drafter lacks: per domain, tau({k}) at half the budget and",
        "# at the budget (balanced blend), read on pool prompts that trained neither, the",
        "# gain per doubling of its data, and the share it gets (in proportion to the gain;",
        f"# at least {FLOOR:.0%})",
    ]
    shares = weights(low, high)
    for d in sorted(b):
        lines.append(
            f"#   {d}: tau {low[d]:.3f} -> {high[d]:.3f}, gain/doubling {b[d] * math.log(2):+.3f}"
            f", share {shares[d]:.2f}"
        )
    return lines


def annotate(recipe: Path, comments: list[str]) -> Path:
    recipe.write_text("\n".join(comments) + "\n" + recipe.read_text())
    return recipe
