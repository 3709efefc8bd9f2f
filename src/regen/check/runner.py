"""`check` as a library call: read a run, encode every completion, count, judge.

The lines go to the workers unparsed, in batches (check/work.py turns each into a result);
the results come back in read order and are folded by one `Tally` here, so the report and
the per-sample file are the same whatever the number of workers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import orjson

from regen.check.sample import SampleResult
from regen.check.stats import StatOptions
from regen.check.tally import CheckReport, Shown, Tally
from regen.check.work import CheckJob, check_lines
from regen.errors import InputError
from regen.finished.encode import Encoder
from regen.finished.read import read_run_lines
from regen.finished.record import Completion
from regen.jsonio import atomic_writer
from regen.parallel import Workers, flat_map_with_rows


def check_lines_of(
    lines: Iterable[bytes],
    encoder: Encoder,
    opts: StatOptions,
    limits: dict[str, float | None],
    *,
    show: int = 0,
    per_sample: IO[bytes] | None = None,
    output_dirs: Iterable[str | Path] = (),
    workers: Workers | None = None,
) -> CheckReport:
    """`output_dirs`: the runs the lines come from, for the composition check; `workers`:
    who encodes (None: this process)."""
    tally = Tally(opts, per_sample, show)
    job = CheckJob(encoder.with_stored_ids(False), opts.degenerate_at)
    for line, (result, readable) in flat_map_with_rows(workers, job, check_lines, lines):
        tally.add(result, _fetcher(encoder, line, result) if show else None, readable=readable)
    return tally.report(encoder, limits, output_dirs)


def _fetcher(encoder: Encoder, line: bytes, result: SampleResult) -> Callable[[], Shown | None]:
    """A sample `--show` keeps is encoded again here: a few dozen, not the run."""

    def fetch() -> Shown | None:
        completion = Completion.of(orjson.loads(line))
        try:
            return completion, encoder.encode(completion)
        except InputError:
            return None

    return fetch


def check_completions(
    records: Iterable[dict],
    encoder: Encoder,
    opts: StatOptions,
    limits: dict[str, float | None],
    **options,
) -> CheckReport:
    """The same over records already read (a test's, a benchmark's)."""
    lines = (orjson.dumps(record) for record in records)
    return check_lines_of(lines, encoder, opts, limits, **options)


def check_run(
    output_dirs: Iterable[str | Path],
    encoder: Encoder,
    opts: StatOptions,
    limits: dict[str, float | None],
    *,
    show: int = 0,
    per_sample: Path | None = None,
    on_row: Callable[[str], None] | None = None,
    workers: Workers | None = None,
) -> CheckReport:
    """Check one or more generate runs; `per_sample` gets one JSON line per sample."""
    dirs = list(output_dirs)
    lines = read_run_lines(dirs, on_row)
    options = {"show": show, "output_dirs": dirs, "workers": workers}
    if per_sample is None:
        return check_lines_of(lines, encoder, opts, limits, **options)
    with atomic_writer(per_sample, "--per-sample") as fh:  # whole, or straight to a stream
        return check_lines_of(lines, encoder, opts, limits, per_sample=fh, **options)


__all__ = ["CheckReport", "Tally", "check_completions", "check_run"]
