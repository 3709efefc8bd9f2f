"""The rejects file: one line per record left out, with where it came from and what to change."""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from regen.errors import InputError
from regen.jsonio import atomic_writer, dumps_line
from regen.prepare.recipe import SourceSpec
from regen.prepare.skip import Skip


class RejectsWriter:
    """Streams to a temporary file, renamed into place only when the run completes (or
    straight through to a stream: see `jsonio.atomic_writer`); with no path (prepare's
    output is a stream and --rejects was not given), nowhere: the report counts the rejects
    either way."""

    def __init__(self, path: Path | None) -> None:
        self._stack = ExitStack()
        self.fh: BinaryIO = self._stack.enter_context(
            atomic_writer(path if path is not None else os.devnull, "--rejects")
        )

    def write(self, spec: SourceSpec, row: int, where: str, err: InputError) -> None:
        line = {
            "source": spec.name,
            "dataset": spec.dataset,
            "row": row,
            "kind": err.kind,
            "skipped": isinstance(err, Skip),
            "reason": err.message,
        }
        if err.hint:
            line["fix"] = err.hint
        if where:
            line["location"] = where
        self.fh.write(dumps_line(line))

    def __enter__(self) -> RejectsWriter:
        return self

    def __exit__(
        self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stack.__exit__(exc_type, exc, tb)
