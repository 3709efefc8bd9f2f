"""How a run ended, in one result and the words the user reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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
        return RunResult(where, err.exit_code, stats, str(err), False, repaired)
    already = exit_code == EXIT_OK and stats.completed + stats.failed + stats.bad_lines == 0
    if already:
        message = f"nothing to do: all {stats.finished} items are already in {where}"
    elif stopped is None:
        # "errors" counts what errors/ holds, as the live view does: failed requests and
        # unusable input lines alike
        unusable = f" ({stats.bad_lines} of them unusable input lines)" if stats.bad_lines else ""
        message = (
            f"done: {stats.completed} new completions, {stats.failed + stats.bad_lines} "
            f"errors{unusable}; output in {where}"
        )
    else:
        message = (
            f"stopped ({stopped.label}) after {stats.completed} new completions; run the same "
            f"command again to resume (finished work is kept; `regen status {where}` shows it)"
        )
        if fatal is not None:
            message = f"{fatal}\n{message}"
    return RunResult(where, exit_code, stats, message, already, repaired)
