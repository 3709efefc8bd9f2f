"""Open a finished run and read its records in order: the one opener every verb uses.

A folder or bucket with no completion shards is refused here, with one message and one
hint, whichever verb asked; the records come shard by shard (a bucket's fetched one at a
time), as parsed dicts or as the unparsed lines that workers parse (`parse_line`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from regen.errors import ConfigError, InputError
from regen.finished.id_arrays import loads_with_id_arrays
from regen.finished.record import Completion
from regen.storage import Store, open_store


def open_run(output_dir: str | Path) -> Store:
    """The store of a `regen generate` run that has completions to read."""
    store = open_store(output_dir)
    if not store.shard_names("completions"):
        raise ConfigError(
            f"no completion shards under {store.where}/completions",
            hint="pass the --output-dir of a `regen generate` run",
        )
    return store


def read_runs(
    output_dirs: Iterable[str | Path], on_row: Callable[[str], None] | None = None
) -> Iterator[Any]:
    """Every finished completion record of one or more `regen generate` output dirs, as
    `records` reads them; `on_row(run)` is called for each (a progress bar)."""
    return records(read_run_lines(output_dirs, on_row))


def records(lines: Iterable[bytes]) -> Iterator[Any]:
    """Each line's record, parsed; `{}` for a line that is not JSON (a corrupt line in a
    shard). Such a line names no prompt and no row, so a pass that draws from ids (the
    held-out split) skips it, and the pass that reads rows (`parse_line`) counts it as
    `bad_json`: never a traceback, never a silent drop."""
    for line in lines:
        try:
            yield orjson.loads(line)
        except orjson.JSONDecodeError:
            yield {}


def read_run_lines(
    output_dirs: Iterable[str | Path], on_row: Callable[[str], None] | None = None
) -> Iterator[bytes]:
    """The same records as unparsed lines, shard by shard (a bucket's fetched one at a time),
    for workers that parse them."""
    for output_dir in output_dirs:
        store = open_run(output_dir)
        for line in store.iter_lines("completions"):
            if on_row is not None:
                on_row(str(output_dir))
            yield line


@dataclass(frozen=True)
class Unreadable:
    """A line that is not a usable completion: its record as far as it was read (`{}` when
    it is not JSON) and why."""

    raw: Any
    error: InputError

    @property
    def kind(self) -> str:
        return self.error.kind


def parse_line(line: bytes, id_arrays: bool = False) -> Completion | Unreadable:
    """A readable completion, or why the line is not one. `id_arrays`: its stored token ids
    as int64 arrays, not lists (id_arrays.py)."""
    try:
        raw: Any = loads_with_id_arrays(line) if id_arrays else None
        if raw is None:
            raw = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        err = InputError(f"a completion line is not valid JSON: {exc}", kind="bad_json")
        return Unreadable({}, err)
    try:
        return Completion.of(raw)
    except InputError as err:
        return Unreadable(raw, err)
