"""The one count of a run: its items, how many are finished (completions and errors, of
them the unusable input lines) and how many are left, for `regen status`, its `--json`,
`regen plan --from-run`, the ETA and generate's summary alike.

An item is a (prompt, sample) of a usable line, or an unusable line (bad JSON, no turns, a
repeated id), which ends in errors/ as one. A blank line is no item. Until a pass over the
whole input has counted them, the items are estimated from the manifest's line count (blank
lines included); once counted, the run writes the count in `progress.json` and, when the
session ends, in its manifest entry (`ended.counted`, per part and input), so that every
reader says the same, and a finished run reads 0 left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from regen.format.part import Part
from regen.run.progress import RunStats


@dataclass(frozen=True)
class RunCount:
    items: int
    completions: int
    errors: int  # what errors/ holds: failed requests and unusable input lines alike
    unusable_lines: int | None  # None: not counted yet
    left: int
    counted: bool  # False: `items` is the estimate from the line count


def session_count(stats: RunStats, part: Part, input_digest: str) -> dict[str, Any] | None:
    """What a session that counted its whole input records in the manifest (`ended.counted`);
    None when it did not (stopped early, a --limit trial, a calibration sample)."""
    if not stats.counted:
        return None
    return {
        "part": f"{part.index}/{part.count}",
        "input": input_digest,
        "items": stats.total,
        "unusable_lines": stats.unusable_lines or 0,
    }


def run_count(
    manifest: dict[str, Any], progress: dict[str, Any] | None, files: dict[str, int]
) -> RunCount:
    """`manifest`: the run's manifest; `progress`: the whole run's snapshot (None for a
    sharded run, whose parts each write their own); `files`: lines in completions/ and
    errors/, the ledger."""
    completions, errors = files["completions"], files["errors"]
    items, unusable = _counted(manifest, progress)
    counted = items is not None
    if items is None:
        samples = manifest["config"]["samples_per_prompt"]
        items = manifest["input"]["lines"] * samples
        if progress is not None:  # a batch file's `n` gives some prompts more samples
            items = max(items, progress.get("total") or 0)
    left = max(0, items - completions - errors)
    return RunCount(
        items, completions, errors=errors, unusable_lines=unusable, left=left, counted=counted
    )


def _counted(
    manifest: dict[str, Any], progress: dict[str, Any] | None
) -> tuple[int | None, int | None]:
    """(items, unusable lines) of the whole input, if a pass counted them: the snapshot of a
    session that did, else every part's latest count of this input in the manifest."""
    if progress is not None and progress.get("total_counted"):
        return progress["total"], progress.get("unusable_lines")
    digest, parts = manifest["input"].get("xxh3_128"), manifest["config"].get("shards", 1)
    latest: dict[str, dict] = {}
    for session in manifest.get("sessions", []):
        counted = (session.get("ended") or {}).get("counted")
        if counted and counted.get("input") == digest:
            latest[counted["part"]] = counted  # sessions are in the order they began
    if len(latest) < parts:
        return None, None
    return (
        sum(c["items"] for c in latest.values()),
        sum(c["unusable_lines"] for c in latest.values()),
    )
