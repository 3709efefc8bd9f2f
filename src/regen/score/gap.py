"""`score --draft ours --draft reference --compare`: each draft against the last one named, on
the rows both scored, paired by row, and where the gap is.

    groups    per group (domain) and k, tau(k) of both and the difference with its 95%
              interval paired by row (compare.Paired: the delta method on each row's share)
    depth     at the largest k, the chance a draft at depth j is accepted once the j - 1
              before it were (accepted_j / reached_j over verify steps), both and the gap
    position  the first guess's agreement (top-1) by where the token sits in the answer
              (early tokens against late ones: POSITION_EDGES), both and the gap

Every interval pairs the same rows on both sides, so a drafter that is better on the same rows
shows it even where rows differ widely from each other. `where` names the group, depth and
position bin with the widest gap, each with its interval.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from regen.finished.record import SampleKey, key_of
from regen.finished.score_rows import read_rows
from regen.score.compare import Paired, paired
from regen.score.outcome import Accept, Lookup, Outcome, from_line, steps_of, tokens_of

POSITION_EDGES = (0, 128, 512, 2048)  # answer-token bins: 0-127, 128-511, 512-2047, 2048+


def reference_rows(rows_file: Path) -> dict[SampleKey, Outcome]:
    rows = ((key_of(r), from_line(r)) for r in read_rows(rows_file))
    return {key: outcome for key, outcome in rows if outcome is not None}


def against(
    rows_file: Path, reference: dict[SampleKey, Outcome], name: str, by: str, ks: list[int]
) -> dict[str, Any]:
    """This draft's rows (`rows_file`) against the reference's outcomes, paired by row."""
    k = max(ks)
    depth = [Paired() for _ in range(k)]
    position = {label: Paired() for label in _labels()}
    for line in read_rows(rows_file):
        ref, ours = reference.get(key_of(line)), from_line(line)
        if ref is None or ours is None or tokens_of(ref) != tokens_of(ours):
            continue  # only rows scored on the same tokens on both sides pair up
        _add_depths(depth, steps_of(ref, k).runs, steps_of(ours, k).runs)
        _add_positions(position, first_guesses(ref), first_guesses(ours))
    result = {
        "reference": name,
        "groups": dict(sorted(paired(rows_file, reference, by, ks).items(), key=_last_overall)),
        "depth": {str(j + 1): p.to_json() for j, p in enumerate(depth)},
        "position": {label: p.to_json() for label, p in position.items() if p.n},
    }
    result["where"] = where(result, k)
    return result


def _last_overall(item: tuple[str, Any]) -> tuple[bool, str]:
    return item[0] == "(overall)", item[0]


def first_guesses(outcome: Outcome) -> list[float]:
    """Per answer token, whether (or how likely) the draft's first guess there is right."""
    if isinstance(outcome, str):
        return [1.0 if c == "1" else 0.0 for c in outcome]
    if isinstance(outcome, Lookup):
        return [1.0 if c == "1" else 0.0 for c in outcome.match()]
    if isinstance(outcome, Accept):
        return outcome.probabilities()
    return outcome.first_guesses()


def _add_depths(depth: list[Paired], ref: tuple, ours: tuple) -> None:
    """Per depth j (1-based): (accepted at j, reached j) over the row's verify steps; a step
    that accepted a drafts reached depths 1..a + 1 and accepted 1..a."""
    for j in range(1, len(depth) + 1):
        depth[j - 1].add(_at_depth(ref, j), _at_depth(ours, j))


def _at_depth(runs: tuple, j: int) -> tuple[float, float]:
    return float(sum(runs[j:])), float(sum(runs[j - 1 :]))


def _add_positions(position: dict[str, Paired], ref: list[float], ours: list[float]) -> None:
    for label, lo, hi in _bins(len(ours)):
        position[label].add((sum(ref[lo:hi]), hi - lo), (sum(ours[lo:hi]), hi - lo))


def _labels() -> list[str]:
    return [label for label, _, _ in _bins(1 << 30)]


def _bins(n: int) -> list[tuple[str, int, int]]:
    out = []
    for i, lo in enumerate(POSITION_EDGES):
        hi = POSITION_EDGES[i + 1] if i + 1 < len(POSITION_EDGES) else None
        label = f"{lo}-{hi - 1}" if hi else f"{lo}+"
        if lo < n:
            out.append((label, lo, min(hi or n, n)))
    return out


def where(result: dict[str, Any], k: int) -> dict[str, Any]:
    """The group, depth and position bin with the widest gap (of those with a figure)."""
    groups = {g: per_k[str(k)] for g, per_k in result["groups"].items() if g != "(overall)"}
    return {
        "group": _widest(groups),
        "depth": _widest(result["depth"]),
        "position": _widest(result["position"]),
    }


def _widest(cells: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    known = {name: c for name, c in cells.items() if c["difference"] is not None}
    if not known:
        return None
    name = max(known, key=lambda n: abs(known[n]["difference"]))
    return {"at": name, **known[name]}
