"""Where a run's files live under its output directory. Nothing is written anywhere else."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from regen.errors import ConfigError
from regen.jsonio import ZST_SUFFIX, iter_lines
from regen.urls import is_url

COMPLETIONS = "completions"
ERRORS = "errors"


@dataclass(frozen=True)
class OutputLayout:
    root: Path
    label: str | None = None  # what the user named, when root only stages it (a bucket URL)
    part: str = ""  # with --shard: each part has its own progress file and lock

    @classmethod
    def at(cls, output_dir: str | Path, part: str = "") -> OutputLayout:
        text = str(output_dir)
        if is_url(text):  # callers route URLs through regen.storage; this is a bug guard
            raise ConfigError(f"{text} is a URL, not a local directory")
        return cls(Path(text).expanduser().resolve(), part=part)

    @property
    def where(self) -> str:
        """The run's location as the user gave it: a path, or the bucket URL."""
        return self.label or str(self.root)

    @property
    def completions(self) -> Path:
        return self.root / COMPLETIONS

    @property
    def errors(self) -> Path:
        return self.root / ERRORS

    @property
    def retried_errors(self) -> Path:
        """Error shards set aside by --retry-errors; kept for the record, not part of the ledger."""
        return self.root / "errors-retried"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def progress(self) -> Path:
        return self.root / progress_name(self.part)

    @property
    def lock(self) -> Path:
        return self.root / (f"run-{self.part}.lock" if self.part else "run.lock")

    def read_manifest(self) -> dict | None:
        return orjson.loads(self.manifest.read_bytes()) if self.manifest.is_file() else None

    def shard_files(self, kind: str) -> list[Path]:
        """Data shards of `kind` (completions or errors), sorted by name (= creation order)."""
        folder = self.root / kind
        if not folder.is_dir():
            return []
        return sorted(
            p
            for p in folder.iterdir()
            if p.name.endswith((".jsonl", ".jsonl" + ZST_SUFFIX)) and not p.name.startswith(".")
        )

    def iter_records(self, kind: str = COMPLETIONS) -> Iterator[dict]:
        """Every finished record of `kind`, in shard order.

        A shard that a live (or killed) run is still appending to may end in a torn line with
        no newline: that line is not finished, so it is not yielded (the next run repairs it).
        """
        for path in self.shard_files(kind):
            yield from iter_shard(path)


def progress_name(part: str = "") -> str:
    return f"progress-{part}.json" if part else "progress.json"


def is_progress(name: str) -> bool:
    return name.startswith("progress") and name.endswith(".json")


def iter_shard(path: Path) -> Iterator[dict]:
    for line in iter_shard_lines(path):
        yield orjson.loads(line)


def iter_shard_lines(path: Path) -> Iterator[bytes]:
    """The shard's finished lines, unparsed (a torn last line is not finished)."""
    for _, line in iter_shard_numbered(path):
        yield line


def iter_shard_numbered(path: Path) -> Iterator[tuple[int, bytes]]:
    """The same, with each line's number in the file (blank lines are counted, not yielded):
    what a message about one line names."""
    pending: tuple[int, bytes] | None = None
    for number, line in iter_lines(path):
        if pending is not None:
            yield pending
        pending = (number, line) if line.strip() else None
    if pending is not None and _ends_with_newline(path):
        yield pending


def _ends_with_newline(path: Path) -> bool:
    if path.name.endswith(ZST_SUFFIX):
        return True  # compressed shards are written whole, when a shard is sealed
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        if fh.tell() == 0:
            return False
        fh.seek(-1, 2)
        return fh.read(1) == b"\n"
