"""The rejects file: one line per record left out, with where it came from and what to change."""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from regen.errors import InputError
from regen.jsonio import dumps_line
from regen.prepare.recipe import SourceSpec
from regen.prepare.skip import Skip


class RejectsWriter:
    """Streams to a temporary file, renamed into place only when the run completes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        self.fh = open(self.tmp, "wb")  # noqa: SIM115 - closed in __exit__

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
        self.fh.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)
