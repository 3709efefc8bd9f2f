"""How a run ended, in one result and the words the user reads."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regen.errors import RegenError
from regen.records import BadLine
from regen.run.input_gate import mostly_unusable, unusable_error
from regen.run.progress import RunStats
from regen.run.stop import StopReason

EXIT_OK = 0


@dataclass
class RunResult:
    output_dir: str
    exit_code: int
    stats: RunStats
    message: str
    already_done: bool = False
    repaired: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class InputSeen:
    """What the input pass found: how many lines, how many usable, the first bad ones."""

    prompts: str | Path
    lines: int
    usable: int
    first_bad: list[BadLine]
    asked_models: Counter[str] = field(default_factory=Counter)  # a batch file's, per request
    model: str = ""  # the model every request went to


def run_result(
    where: str,
    stats: RunStats,
    seen: InputSeen,
    stopped: StopReason | None,
    fatal: RegenError | None,
    repaired: list[str],
) -> RunResult:
    exit_code = EXIT_OK if stopped is None else stopped.exit_code
    if exit_code == EXIT_OK and mostly_unusable(seen.lines, seen.usable):
        # Recorded in errors/ and kept, but a run that made little of its input is no
        # success: say so with a non-zero exit.
        err = unusable_error(
            seen.prompts, seen.lines, seen.usable, seen.first_bad, f"of {seen.lines}"
        )
        return RunResult(
            where,
            err.exit_code,
            stats=stats,
            message=str(err),
            already_done=False,
            repaired=repaired,
        )
    already = exit_code == EXIT_OK and stats.completed + stats.failed + stats.bad_lines == 0
    if already:
        message = f"nothing to do: all {stats.finished} items are already in {where}"
    elif stopped is None:
        # "errors" counts what errors/ holds, as the live view does: failed requests and
        # unusable input lines alike
        unusable = f" ({stats.bad_lines} of them unusable input lines)" if stats.bad_lines else ""
        message = (
            f"done: {stats.completed} new completions, {stats.failed + stats.bad_lines} "
            f"errors{unusable}; {_whole(stats)}output in {where}"
        )
        for note in (other_models_line(seen), end_game_line(stats.end_game)):
            if note:
                message += f"\n{note}"
    else:
        message = (
            f"stopped ({stopped.label}) after {stats.completed} new completions; run the same "
            f"command again to resume (finished work is kept; `regen status {where}` shows it)"
        )
        if fatal is not None:
            message = f"{fatal}\n{message}"
    return RunResult(
        where, exit_code, stats=stats, message=message, already_done=already, repaired=repaired
    )


def _whole(stats: RunStats) -> str:
    """A resumed run's whole count beside this session's, as `regen status` says it."""
    if not stats.finished_before:
        return ""
    return f"the run has {stats.finished} of {stats.total} items, {stats.remaining} left; "


def other_models_line(seen: InputSeen) -> str | None:
    """A batch file whose requests name another model: every one of them went to the run's
    model, and the whole file is counted here (the header saw only its first lines)."""
    other = {name: n for name, n in seen.asked_models.items() if name != seen.model}
    if not other:
        return None
    asked = ", ".join(f"{name} ({n})" for name, n in sorted(other.items()))
    total = sum(other.values())
    return (
        f"note: {total} of the batch file's {seen.usable} requests asked for another model: "
        f"{asked}; every request went to {seen.model}"
    )


def end_game_line(end_game: dict[str, Any] | None) -> str | None:
    """What the end of the batch cost: the drain (every item sent, the last answers still
    coming) and the fleet's idle share in it, and the copies raced against slow requests."""
    drain = (end_game or {}).get("drain")
    if end_game is None or drain is None:
        return None
    state = "" if drain["finished"] else " so far"
    span = drain["seconds"]
    took = f"{span:.1f}s" if span >= 1 else f"{span * 1000:.0f}ms"
    line = f"end of batch: drain {took}{state}, fleet idle {drain['idle_ratio']:.0%} of it"
    if end_game["copies_started"]:
        line += (
            f"; {end_game['copies_started']} copies of slow requests, "
            f"{end_game['copies_won']} came first, "
            f"~{end_game['copy_tokens_wasted']} tokens wasted"
        )
    return line
