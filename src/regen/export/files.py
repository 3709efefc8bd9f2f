"""Dataset files that appear whole or not at all, in a layout `datasets.load_dataset` reads.

Rows go to hidden temporary files (`.train.parquet.tmp-PID`; datasets ignores dot-files) and
are renamed into place only when every split is complete, so a killed export leaves nothing
that looks finished.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from regen.errors import ConfigError
from regen.jsonio import atomic_write_json, dumps_line, iter_jsonl

SPLITS = ("train", "validation")
FILE_TYPES = ("jsonl", "parquet")
ROW_GROUP = 1000


class SplitWriter:
    """Streams rows into one temporary file per split; `commit` publishes them together."""

    def __init__(self, out_dir: Path, file_type: str) -> None:
        self.out_dir, self.file_type = out_dir, file_type
        self.counts: dict[str, int] = {}
        self._tmp: dict[str, Path] = {}
        self._jsonl: dict[str, IO[bytes]] = {}
        self._parquet: dict[str, pq.ParquetWriter] = {}
        self._pending: dict[str, list[dict]] = {}

    def write(self, split: str, row: dict[str, Any]) -> None:
        self.counts[split] = self.counts.get(split, 0) + 1
        if split not in self._tmp:
            self._tmp[split] = self.out_dir / f".{split}.{self.file_type}.tmp-{os.getpid()}"
        if self.file_type == "jsonl":
            if split not in self._jsonl:
                # closed in commit/abort: it outlives this call
                self._jsonl[split] = open(self._tmp[split], "wb")  # noqa: SIM115
            self._jsonl[split].write(dumps_line(row))
            return
        pending = self._pending.setdefault(split, [])
        pending.append(row)
        if len(pending) >= ROW_GROUP:
            self._flush(split)

    def _flush(self, split: str) -> None:
        rows, self._pending[split] = self._pending.get(split, []), []
        if not rows:
            return
        writer = self._parquet.get(split)
        table = pa.Table.from_pylist(rows, schema=writer.schema if writer else None)
        if writer is None:
            writer = self._parquet[split] = pq.ParquetWriter(self._tmp[split], table.schema)
        writer.write_table(table)

    def commit(self) -> list[Path]:
        """Close, fsync and rename every split; remove split files this export replaces."""
        for split in list(self._pending):
            self._flush(split)
        for writer in self._parquet.values():
            writer.close()
        for fh in self._jsonl.values():
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
        written = []
        for split, tmp in self._tmp.items():
            target = self.out_dir / f"{split}.{self.file_type}"
            os.replace(tmp, target)
            written.append(target)
        for stale in data_files(self.out_dir):
            if stale not in written:
                stale.unlink()  # an older export's split or file type would be loaded too
        return written

    def abort(self) -> None:
        for fh in self._jsonl.values():
            fh.close()
        for writer in self._parquet.values():
            writer.close()
        for tmp in self._tmp.values():
            tmp.unlink(missing_ok=True)


MARKER = ".regen-export"  # no .json suffix: trainers that glob *.json must not load it


def claim_output(out_dir: Path, *, overwrite: bool, merging: bool) -> None:
    """Refuse to write over an earlier export or into an unrelated non-empty directory."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--output-dir {out_dir} is a file, not a directory")
    entries = [p.name for p in out_dir.iterdir()] if out_dir.is_dir() else []
    if entries and not overwrite:
        if (out_dir / MARKER).exists() and merging:
            pass  # --merge-into reads the earlier rows first, then replaces the files
        elif (out_dir / MARKER).exists() or data_files(out_dir):
            raise ConfigError(
                f"--output-dir {out_dir} already holds an export; it would be replaced",
                hint="pass --overwrite to replace it, --merge-into it to add to it, "
                "or choose another --output-dir",
            )
        else:
            shown = ", ".join(sorted(entries)[:3]) + (", ..." if len(entries) > 3 else "")
            raise ConfigError(
                f"--output-dir {out_dir} is a non-empty directory that is not an export ({shown})",
                hint="choose an empty or new directory, or pass --overwrite to write there",
            )
    out_dir.mkdir(parents=True, exist_ok=True)


def mark_output(out_dir: Path, summary: Any) -> None:
    """What this directory holds and how to train on it; also marks it as an export."""
    atomic_write_json(out_dir / MARKER, summary.to_json())


def data_files(folder: Path) -> list[Path]:
    return [
        folder / f"{s}.{t}" for s in SPLITS for t in FILE_TYPES if (folder / f"{s}.{t}").exists()
    ]


def read_rows(folder: Path) -> Iterator[tuple[str, dict]]:
    """(split, row) for every row of an earlier export (the --merge-into target)."""
    files = data_files(folder)
    if not files:
        raise ConfigError(
            f"--merge-into {folder}: no train/validation .jsonl or .parquet file there",
            hint="point it at the output directory of an earlier `regen export`",
        )
    for path in files:
        split = path.name.split(".")[0]
        if path.suffix == ".jsonl":
            for _, row in iter_jsonl(path):
                yield split, row
        else:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=ROW_GROUP):
                for row in batch.to_pylist():
                    yield split, row
