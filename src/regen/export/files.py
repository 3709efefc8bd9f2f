"""Dataset files that appear whole or not at all, in the layout the Hub and `datasets` read.

    OUT/data/<config>/<split>-00000-of-00002.<ext>    one folder per domain (the category)
    OUT/README.md, OUT/regen.json                     the card, written after the files

Rows go to hidden temporary files (`.train-00000.parquet.tmp-PID`; datasets ignores
dot-files) and are renamed into place only when every shard is complete, so a killed export
leaves nothing that looks finished. A Parquet shard is closed at `SHARD_BYTES` of row data
(the Hub's viewer and `datasets` stream shards of a few hundred MB well); a JSONL file at
`JSONL_MB` (`--max-file-mb` sets either): SpecForge opens one file and holds every pre-tokenised row
of it as Python lists, about 49 bytes a token in each process (docs/training.md), so a split
of 1.6B tokens in one 10 GB file needs about 75 GB a process. Below that size a split is one
file, as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from regen.errors import ConfigError
from regen.jsonio import atomic_write_json, dumps_line, iter_jsonl

SPLITS = ("train", "validation", "holdout")  # holdout: finished/holdout.py
FILE_TYPES = ("jsonl", "parquet")
ROW_GROUP = 1000
SHARD_BYTES = 256 * 2**20
JSONL_MB = 1024  # the default of --max-file-mb
DATA = "data"


class _Shard:
    """One temporary file being filled."""

    def __init__(self, path: Path, file_type: str) -> None:
        self.path, self.file_type, self.bytes = path, file_type, 0
        self._jsonl: IO[bytes] | None = None
        self._parquet: pq.ParquetWriter | None = None
        self._pending: list[dict] = []
        self._closed = False

    def write(self, row: dict[str, Any]) -> None:
        if self.file_type == "jsonl":
            if self._jsonl is None:
                self._jsonl = open(self.path, "wb")  # noqa: SIM115 (closed in close())
            line = dumps_line(row)
            self._jsonl.write(line)
            self.bytes += len(line)
            return
        self._pending.append(row)
        if len(self._pending) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        rows, self._pending = self._pending, []
        if not rows:
            return
        schema = self._parquet.schema if self._parquet else None
        table = arrow_table(rows, schema)
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(self.path, table.schema)
        self._parquet.write_table(table)
        self.bytes += table.nbytes

    @property
    def schema(self) -> pa.Schema | None:
        return self._parquet.schema if self._parquet is not None else None

    def close(self, sync: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        if sync:
            self._flush()
        if self._parquet is not None:
            self._parquet.close()
        if self._jsonl is not None:
            if sync:
                self._jsonl.flush()
                os.fsync(self._jsonl.fileno())
            self._jsonl.close()


def arrow_table(rows: list[dict[str, Any]], schema: pa.Schema | None) -> pa.Table:
    """`pa.Table.from_pylist(rows, schema)`, with the columns whose every value is an int64
    array (the token columns workers hand over: export/work.py) built in one copy each:
    Arrow converts a list or an array inside a row value by value. Same table, same file."""
    names = list(rows[0])
    arrays = [k for k in names if all(_int_array(row.get(k)) for row in rows)]
    if not arrays:
        return pa.Table.from_pylist(rows, schema=schema)
    rest = [{k: v for k, v in row.items() if k not in arrays} for row in rows]
    rest_schema = None if schema is None else pa.schema([f for f in schema if f.name not in arrays])
    table = pa.Table.from_pylist(rest, schema=rest_schema)
    for name in arrays:
        values = [row[name] for row in rows]
        offsets = np.zeros(len(values) + 1, dtype=np.int32)
        np.cumsum([len(v) for v in values], out=offsets[1:])
        column = pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.concatenate(values)))
        if schema is not None:
            column = column.cast(schema.field(name).type)
        table = table.add_column(names.index(name), name, column)
    return table


def _int_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == np.int64 and value.ndim == 1


class SplitWriter:
    """Streams rows into shards per (config, split); `commit` publishes them together."""

    def __init__(
        self,
        out_dir: Path,
        file_type: str,
        max_bytes: int | None = None,
    ) -> None:
        """`max_bytes` (`--max-file-mb`): a file is closed once it holds that many bytes (a
        JSONL file) or bytes of row data (a Parquet shard; compressed on disk, it is smaller);
        None: the file type's own size (JSONL_MB, SHARD_BYTES); 0: one file a split."""
        self.out_dir, self.file_type = out_dir, file_type
        usual = SHARD_BYTES if file_type == "parquet" else JSONL_MB * 2**20
        self.limit = usual if max_bytes is None else (max_bytes or None)
        self.counts: dict[str, int] = {}  # split -> rows
        self.by_config: dict[str, dict[str, int]] = {}  # config -> split -> rows
        self._open: dict[tuple[str, str], _Shard] = {}
        self._done: dict[tuple[str, str], list[_Shard]] = {}
        self._schemas: list[pa.Schema] = []
        self._unseen: list[dict] = []  # rows whose types are not in `schema` yet

    @property
    def schema(self) -> pa.Schema | None:
        """Every row's columns and types, unified: the card declares these features, so a
        split or domain whose rows lack an optional field (tools) still loads."""
        if self._unseen:
            # pa.array unites the keys of every row (from_pylist reads the first row's only)
            self._schemas.append(pa.schema(list(pa.array(self._unseen).type)))
            self._unseen = []
        if not self._schemas:
            return None
        self._schemas = [pa.unify_schemas(self._schemas, promote_options="permissive")]
        return self._schemas[0]

    def write(self, config: str, split: str, row: dict[str, Any]) -> None:
        self.counts[split] = self.counts.get(split, 0) + 1
        per = self.by_config.setdefault(config, {})
        per[split] = per.get(split, 0) + 1
        if self.file_type == "jsonl":  # a Parquet shard knows its schema
            self._unseen.append(row)
            if len(self._unseen) >= ROW_GROUP:
                _ = self.schema
        key = (config, split)
        shard = self._open.get(key)
        if shard is None:
            folder = self.out_dir / DATA / config
            folder.mkdir(parents=True, exist_ok=True)
            n = len(self._done.get(key, []))
            tmp = folder / f".{split}-{n:05d}.{self.file_type}.tmp-{os.getpid()}"
            shard = self._open[key] = _Shard(tmp, self.file_type)
        shard.write(row)
        if self.limit is not None and shard.bytes >= self.limit:
            shard.close()  # a full shard is finished now, not held open until the commit
            self._done.setdefault(key, []).append(self._open.pop(key))

    def commit(self) -> list[Path]:
        """Close, fsync and rename every shard; remove data files this export replaces."""
        for key, shard in self._open.items():
            self._done.setdefault(key, []).append(shard)
        self._open = {}
        written = []
        for (config, split), shards in sorted(self._done.items()):
            for n, shard in enumerate(shards):
                shard.close()
                if shard.schema is not None:
                    self._schemas.append(shard.schema)
                name = f"{split}-{n:05d}-of-{len(shards):05d}.{self.file_type}"
                target = self.out_dir / DATA / config / name
                os.replace(shard.path, target)
                written.append(target)
        for stale in data_files(self.out_dir):
            if stale not in written:
                stale.unlink()  # an older export's shard, config or file type would be loaded
        for folder in (self.out_dir / DATA).glob("*"):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        return written

    def abort(self) -> None:
        for shard in [*self._open.values(), *(s for v in self._done.values() for s in v)]:
            shard.close(sync=False)
            shard.path.unlink(missing_ok=True)
        for folder in (self.out_dir / DATA).glob("*"):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        if (self.out_dir / DATA).is_dir() and not any((self.out_dir / DATA).iterdir()):
            (self.out_dir / DATA).rmdir()


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
    """Every published shard under `folder/data`, sorted; also `train.jsonl` and the like at
    the top, as exports before the card wrote them (merged from, then replaced)."""
    shards = [
        p
        for t in FILE_TYPES
        for p in (folder / DATA).glob(f"*/*.{t}")
        if p.name.split("-")[0] in SPLITS
    ]
    legacy = [folder / f"{s}.{t}" for s in SPLITS for t in FILE_TYPES]
    return sorted(shards) + [p for p in legacy if p.is_file()]


def layout(folder: Path) -> dict[str, dict[str, list[str]]]:
    """config -> split -> shard paths relative to `folder`: what the card's `configs` name."""
    out: dict[str, dict[str, list[str]]] = {}
    for path in data_files(folder):
        if path.parent == folder:
            continue  # an older export's file, replaced by this one's shards
        split = path.name.split("-")[0]
        rel = path.relative_to(folder).as_posix()
        out.setdefault(path.parent.name, {}).setdefault(split, []).append(rel)
    return out


def read_rows(folder: Path) -> Iterator[tuple[str, str, dict]]:
    """(config, split, row) for every row of an earlier export (the --merge-into target)."""
    files = data_files(folder)
    if not files:
        raise ConfigError(
            f"--merge-into {folder}: no data/<config>/<split>-*.jsonl or .parquet file there",
            hint="point it at the output directory of an earlier `regen export`",
        )
    for path in files:
        config = path.parent.name if path.parent != folder else DEFAULT
        split = path.name.split("-")[0].split(".")[0]
        if path.suffix == ".jsonl":
            for _, row in iter_jsonl(path):
                yield config, split, row
        else:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=ROW_GROUP):
                for row in batch.to_pylist():
                    yield config, split, row


def config_name(domain: str) -> str:
    """A folder and config name from a category: lower case, [a-z0-9_], never `default` (the
    config that holds every domain)."""
    name = "".join(c if c.isalnum() else "_" for c in domain.lower()).strip("_") or "none"
    return f"domain_{name}" if name == DEFAULT else name


DEFAULT = "default"
