"""`export --holdout F`: the held-out split drawn over the runs, as `score --holdout` draws it
(regen.finished.holdout), and what export refuses or warns about it."""

from __future__ import annotations

from pathlib import Path

from regen.errors import ConfigError
from regen.export.formats import Format
from regen.finished.holdout import HeldOut, Holdout, prompts_of
from regen.finished.read import read_runs
from regen.storage import open_store


def validate_holdout(fmt: Format, holdout: Holdout | None, merge_into: Path | None) -> None:
    if holdout is None:
        return
    if not fmt.is_training_set:
        raise ConfigError(f"--format {fmt.name} writes one file with no splits: no --holdout")
    if merge_into is not None:
        raise ConfigError(
            "--holdout with --merge-into: the split is drawn over the runs' prompts, and the "
            "earlier export's rows were split without them",
            hint="export the runs together in one call (regen export RUN1 RUN2 ...)",
        )


def draw_holdout(holdout: Holdout | None, dirs: list) -> tuple[HeldOut | None, list[str]]:
    """The held-out split, drawn per run as `score RUN --holdout` draws it, and a warning for
    each run that has not answered every prompt of its prompt file."""
    if holdout is None:
        return None, []
    parts, notes = [], []
    for run in dirs:
        part = holdout.draw(prompts_of(read_runs([run])))
        lines = ((open_store(run).read_manifest() or {}).get("input") or {}).get("lines")
        parts.append(part)
        notes += [n for n in [part.unanswered(str(run), lines)] if n]
    return HeldOut.union(parts), notes
