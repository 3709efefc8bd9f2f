"""Which input lines a resume can pass over without reading them.

A resume streams the input to find what is left; parsing every finished line of a 10M-prompt
file costs minutes. The ledger knows, from the sidecars, the input line of every finished
record, so this map keeps one byte per input line: how many of its samples are finished, or
NOTHING_LEFT for a line that needs none (an unusable line already recorded, or a line that
another `--shard` part has dealt with). Runs of such lines are passed over by the reader in
bulk (a newline count), and only the other lines are parsed.

Line numbers mean something only in the input they were read from, so the map is trusted
only if every record of this part names its line in this very input (its shard's name carries
the input's digest). Otherwise (a run started by an older regen, a changed input, duplicate
records) the resume reads every line, as before, and `why_not` says why.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

NOTHING_LEFT = 0xFF
MAX_SAMPLES = NOTHING_LEFT - 1
WINDOW = 1 << 20  # lines a step of `runs` looks at


@dataclass(frozen=True)
class SkipRun:
    """Input lines first..last (1-based, inclusive), none of which needs any work."""

    first: int
    last: int
    finished: int  # lines of this part whose samples are all finished
    unusable: int  # lines of this part already recorded as unusable


class LineMap:
    def __init__(self) -> None:
        self._counts = np.zeros(0, dtype=np.uint8)
        self.why_not: str | None = None

    @property
    def trusted(self) -> bool:
        return self.why_not is None

    def distrust(self, why: str) -> None:
        if self.why_not is None:
            self.why_not = why
        self._counts = np.zeros(0, dtype=np.uint8)  # no use for it any more

    def add_samples(self, lines: np.ndarray) -> None:
        """One finished sample of this part at each of `lines` (repeats allowed)."""
        lines = self._valid(lines)
        if not len(lines) or not self.trusted:
            return
        lo, hi = int(lines.min()), int(lines.max())
        self._grow(hi)
        span = self._counts[lo : hi + 1]
        added = np.bincount(lines - lo, minlength=hi - lo + 1)
        if np.any((span == NOTHING_LEFT) & (added > 0)):
            self.distrust("an input line is both unusable and finished")
            return
        total = span.astype(np.int64) + added
        span[:] = np.minimum(total, MAX_SAMPLES).astype(np.uint8)

    def add_nothing_left(self, lines: np.ndarray) -> None:
        """Lines that need no work from this part."""
        lines = self._valid(lines)
        if not len(lines) or not self.trusted:
            return
        self._grow(int(lines.max()))
        now = self._counts[lines]
        if np.any((now != 0) & (now != NOTHING_LEFT)):
            self.distrust("an input line is both unusable and finished")
            return
        self._counts[lines] = NOTHING_LEFT

    def finished_samples(self, line: int) -> int:
        counts = self._counts
        return int(counts[line]) if line < len(counts) and counts[line] != NOTHING_LEFT else 0

    def runs(self, samples: int, unusable_lines: set[int]) -> Iterator[SkipRun]:
        """The runs of lines that need nothing, in input order. Worked out a window of lines
        at a time, so that the temporaries stay a few MB however long the input is."""
        if not self.trusted or samples > MAX_SAMPLES or not len(self._counts):
            return
        bad = np.array(sorted(unusable_lines), dtype=np.int64)
        held: list[int] | None = None  # [first, last, finished]: may go on in the next window
        for lo in range(0, len(self._counts), WINDOW):
            for first, last, finished in _window_runs(self._counts[lo : lo + WINDOW], lo, samples):
                if held is not None and held[1] == first - 1:  # one run across two windows
                    held[1], held[2] = last, held[2] + finished
                    continue
                if held is not None:
                    yield _run(held, bad)
                held = [first, last, finished]
        if held is not None:
            yield _run(held, bad)

    def _grow(self, line: int) -> None:
        if line >= len(self._counts):
            bigger = np.zeros(max(line + 1, len(self._counts) * 3 // 2), dtype=np.uint8)
            bigger[: len(self._counts)] = self._counts
            self._counts = bigger

    def _valid(self, lines: np.ndarray) -> np.ndarray:
        lines = np.asarray(lines, dtype=np.int64)
        if len(lines) and int(lines.min()) < 1:
            self.distrust("a record does not name its input line")
        return lines


def _window_runs(counts: np.ndarray, lo: int, samples: int) -> Iterator[tuple[int, int, int]]:
    """(first, last, finished lines) of the skippable runs in counts[lo:lo + len(counts)]."""
    finished = counts == samples
    skip = finished | (counts == NOTHING_LEFT)
    if lo == 0:
        skip[0] = False  # there is no line 0
    edges = np.diff(skip.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)  # ends: one past
    done = np.concatenate([[0], np.cumsum(finished, dtype=np.int64)])
    counted = done[ends] - done[starts]
    for start, end, n in zip(starts.tolist(), ends.tolist(), counted.tolist(), strict=True):
        yield lo + start, lo + end - 1, n


def _run(held: list[int], bad: np.ndarray) -> SkipRun:
    first, last, finished = held
    unusable = int(np.searchsorted(bad, last, side="right") - np.searchsorted(bad, first))
    return SkipRun(first, last, finished, unusable)
