"""The input as the dispatcher sees it: the pending (prompt, sample) items in input order,
streamed, with every finished one skipped and every unusable line handed on to be recorded.

It also learns what only a whole pass over the input tells: the exact total, and how many
lines were usable (a file that is mostly unusable is no success, however it ends).

On a resume, lines the ledger's `LineMap` says need nothing are passed over unread (their
counts come from the map), so restarting a 10M-prompt run does not parse 10M lines. A line
that is read is checked for a repeated id against the ids read in this pass and, since the
ids of skipped lines are not read, against the ledger: an id finished by another line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from regen.format.part import Part
from regen.inputs import read_prompts
from regen.prompt_fields import ignored_note
from regen.records import BadLine, Finished, Prompt, WorkItem, record_key
from regen.run.config import InputConfig
from regen.run.input_gate import batch_models_in
from regen.run.ledger import FIRST_BAD_KEPT, Ledger
from regen.run.linemap import MAX_SAMPLES, LineMap
from regen.run.progress import RunStats
from regen.run.repeats import IdsSeen


class Intake:
    def __init__(
        self,
        work: InputConfig,
        part: Part,
        ledger: Ledger,
        stats: RunStats,
        on_bad_line: Callable[[BadLine], None],
        stopped: Callable[[], bool] = lambda: False,
        only_lines: frozenset[int] | None = None,
        on_event: Callable[[str], None] = lambda text: None,
    ) -> None:
        """`only_lines`: regen plan's calibration sample, these input lines (1-based) only, as
        the first records of the run; the rest stays pending for `regen generate`."""
        self.prompts, self.samples, self.part = work.prompts, work.samples_per_prompt, part
        self.only_lines, self.limit = only_lines, work.limit
        self.ledger = ledger
        self.stats = stats
        self.on_bad_line = on_bad_line
        self.stopped = stopped
        self.first_bad: list[BadLine] = []
        self.exact_total: int | None = None  # known once the whole input has been read
        self.limited = False  # --limit left lines unread: the total is the trial's only
        self.planned = 0  # samples of the usable prompts read (a batch's n varies by record)
        # a batch file's `n` gives a prompt its own sample count, which neither the line map
        # nor the by-id shortcut knows: every line is read and judged by its own count
        self.per_record = batch_models_in(work.prompts) is not None
        self.lines = self.usable = 0  # of the whole input, once read
        self.asked_models: Counter[str] = Counter()  # a batch file's `model`s, per request
        self.on_event = on_event
        self.unread_fields: set[str] = set()  # top-level fields already said to be unread

    def items(self) -> Iterator[WorkItem | None]:
        """Pending items in input order; None now and then, so that the dispatcher yields to
        the event loop while it skips over a long run of finished lines."""
        seen_ids = IdsSeen()  # the rule plan counts by too
        lines_map = self._usable_map()
        if lines_map is not None:
            self.first_bad = sorted(self.ledger.first_bad, key=lambda b: b.line)[:FIRST_BAD_KEPT]
        skip = self._counted(lines_map) if lines_map is not None else None
        is_finished = self._is_finished if lines_map is None and not self.per_record else None
        samples, only = self.samples, self.only_lines
        outside = read = 0  # outside: lines a calibration sample leaves to the run
        for entry in read_prompts(self.prompts, is_finished, self.part, skip):
            if self.limit is not None and entry.line > self.limit:
                self.limited = True
                break  # --limit: a trial of the first lines; the rest stays pending
            self.lines += 1
            read += 1
            if self.stopped():
                return
            if read % 1000 == 0:
                yield None
            if only is not None and entry.line not in only:
                outside += 1
                continue
            if isinstance(entry, BadLine):
                self._bad(entry)
                continue
            finished = [True] * samples if isinstance(entry, Finished) else self._finished(entry)
            skipped = self._repeat_of_a_skipped_line(entry, finished, lines_map)
            repeat = seen_ids.repeat(entry.line, entry.id, first_was_skipped=skipped)
            if repeat is not None:
                self._bad(repeat)
                continue
            self.usable += 1
            if isinstance(entry, Prompt):
                self._note(entry)
            self.planned += len(finished)
            self.stats.skipped += sum(finished)
            for sample, done in enumerate(finished):
                if not done:
                    yield WorkItem(entry, sample)  # type: ignore[arg-type]
        self.lines -= outside  # a calibration sample is its own job
        self.exact_total = self.planned + (self.lines - self.usable)

    def count_into(self, stats: RunStats) -> None:
        """The exact total into `stats` once the input pass is done (it was estimated from
        the line count, blank lines included); the whole input's, not a --limit trial's or a
        calibration sample's, is the run's count (`regen.run.counts`)."""
        if self.exact_total is None:
            return  # the input was left early
        stats.total = self.exact_total
        if self.only_lines is None and not self.limited:
            stats.counted = True
            stats.unusable_lines = self.lines - self.usable

    def _note(self, prompt: Prompt) -> None:
        if prompt.asked_model is not None:
            self.asked_models[prompt.asked_model] += 1
        new = tuple(f for f in prompt.ignored if f not in self.unread_fields)
        if new:  # once per field name, not once per line of a million-line file
            self.unread_fields.update(new)
            self.on_event(ignored_note(prompt.line, new))

    def _usable_map(self) -> LineMap | None:
        """The ledger's line map, if this pass may skip by it."""
        lines_map = self.ledger.lines
        if self.only_lines is not None or self.samples > MAX_SAMPLES or self.per_record:
            return None
        return lines_map if lines_map.trusted else None  # the run says why not

    def _counted(self, lines_map: LineMap) -> Iterator[tuple[int, int]]:
        """The map's skip runs, counted as they are passed over."""
        samples = self.samples
        for run in lines_map.runs(samples, self.ledger.bad_lines):
            self.lines += run.finished + run.unusable
            self.usable += run.finished
            self.planned += run.finished * samples
            self.stats.skipped += run.finished * samples
            yield run.first, run.last

    def _finished(self, entry: Prompt) -> list[bool]:
        """Which of the line's samples the ledger has (once per line: hashing is per key)."""
        samples = range(entry.samples or self.samples)
        return [self.ledger.finished(record_key(entry.id, k)) for k in samples]

    @staticmethod
    def _repeat_of_a_skipped_line(
        entry: Prompt | Finished, finished: list[bool], lines_map: LineMap | None
    ) -> bool:
        """A line none of whose samples is finished, whose id is finished all the same: its
        first use is a line this pass skipped, so it is a repeat."""
        if lines_map is None or lines_map.finished_samples(entry.line):
            return False
        return any(finished)

    def _is_finished(self, prompt_id: str) -> bool:
        samples = range(self.samples)
        return all(self.ledger.finished(record_key(prompt_id, k)) for k in samples)

    def _bad(self, bad: BadLine) -> None:
        if len(self.first_bad) < FIRST_BAD_KEPT:
            self.first_bad.append(bad)
        self.on_bad_line(bad)
