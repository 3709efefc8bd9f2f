"""The input as the dispatcher sees it: the pending (prompt, sample) items in input order,
streamed, with every finished one skipped and every unusable line handed on to be recorded.

It also learns what only a whole pass over the input tells: the exact total, and how many
lines were usable (a file that is mostly unusable is no success, however it ends).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import xxhash

from regen.inputs import read_prompts
from regen.records import BadLine, Finished, WorkItem, record_key
from regen.run.config import GenerateConfig
from regen.run.keyset import KeySet
from regen.run.ledger import Ledger
from regen.run.progress import RunStats

FIRST_BAD_KEPT = 3  # quoted when the input turns out mostly unusable


class Intake:
    def __init__(
        self,
        config: GenerateConfig,
        ledger: Ledger,
        stats: RunStats,
        on_bad_line: Callable[[BadLine], None],
        stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.stats = stats
        self.on_bad_line = on_bad_line
        self.stopped = stopped
        self.first_bad: list[BadLine] = []
        self.exact_total: int | None = None  # known once the whole input has been read
        self.lines = self.usable = 0  # of the whole input, once read

    def items(self) -> Iterator[WorkItem | None]:
        """Pending items in input order; None now and then, so that the dispatcher yields to
        the event loop while it skips over a long run of finished lines."""
        seen_ids = KeySet()  # every id of the input: ~9 bytes each, not ~70 in a set
        lines = usable = outside = 0  # outside: lines a calibration sample leaves to the run
        samples = self.config.samples_per_prompt
        only = self.config.only_lines
        for entry in read_prompts(self.config.prompts, self._is_finished, self.config.part):
            lines += 1
            if self.stopped():
                return
            if lines % 1000 == 0:
                yield None
            if only is not None and entry.line not in only:
                outside += 1
                continue
            if isinstance(entry, BadLine):
                self._bad(entry)
                continue
            if not seen_ids.add_new(xxhash.xxh3_64_intdigest(entry.id.encode())):
                self._bad(
                    BadLine(entry.line, "duplicate_id", f"id {entry.id!r} appears again", entry.id)
                )
                continue
            usable += 1
            if isinstance(entry, Finished):
                self.stats.skipped += samples
                continue
            for sample in range(samples):
                if self.ledger.finished(record_key(entry.id, sample)):
                    self.stats.skipped += 1
                    continue
                yield WorkItem(entry, sample)
        self.lines, self.usable = lines - outside, usable  # a calibration sample is its own job
        self.exact_total = usable * samples + (self.lines - usable)

    def _is_finished(self, prompt_id: str) -> bool:
        samples = self.config.samples_per_prompt
        return all(self.ledger.finished(record_key(prompt_id, k)) for k in range(samples))

    def _bad(self, bad: BadLine) -> None:
        if len(self.first_bad) < FIRST_BAD_KEPT:
            self.first_bad.append(bad)
        self.on_bad_line(bad)
