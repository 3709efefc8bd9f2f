"""Rows from a source, streamed: local files (JSONL, .zst, JSON arrays, Parquet, globs) or a
Hugging Face dataset through the `datasets` library.

Each row comes as (row number, dict or InputError, where): a line that is not JSON is a
reject with its file and line, not the end of the run.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from regen.errors import ConfigError, InputError
from regen.hub import check_repo
from regen.jsonio import iter_lines, open_binary
from regen.prepare.recipe import SourceSpec
from regen.urls import is_url

Row = tuple[int, Any, str]  # (0-based row, dict or InputError, "file:line" or "")
PARQUET_BATCH = 2048


def read_rows(spec: SourceSpec) -> Iterator[Row]:
    rows = _hf_rows(spec) if spec.hf else _local_rows(spec.local_pattern)
    for index, (value, where) in enumerate(rows):
        if not isinstance(value, (dict, InputError)):
            value = InputError(f"row is a {type(value).__name__}, not an object", kind="bad_row")
        yield index, value, where


def check_sources(specs: Iterable[SourceSpec]) -> None:
    """Every local path matches a file and every Hub name exists, before any row is read:
    a typo in the last source must not wait for the first ones to be read in full."""
    for spec in specs:
        try:
            if spec.hf is None:
                local_paths(spec.local_pattern)
            elif not _local_dataset(spec.hf):
                check_repo(spec.hf, "dataset", "hf:")
        except ConfigError as err:
            raise ConfigError(f"source {spec.name!r}: {err.message}", hint=err.hint) from err


def _local_dataset(hf: str) -> bool:
    """A `save_to_disk` directory, or any local folder datasets can load."""
    return Path(os.path.expanduser(hf)).is_dir()


def local_paths(pattern: str) -> list[str]:
    """The files a `path` names: one file, or a glob expanded in sorted (stable) order."""
    expanded = os.path.expanduser(pattern)
    if is_url(expanded):
        return [expanded]
    if any(ch in expanded for ch in "*?["):
        paths = sorted(p for p in glob.glob(expanded, recursive=True) if os.path.isfile(p))
    else:
        paths = [expanded] if os.path.isfile(expanded) else []
    if not paths:
        raise ConfigError(
            f"no file matches {pattern!r}",
            hint="check the path (globs like data/*.jsonl are allowed)",
        )
    return paths


def _local_rows(pattern: str) -> Iterator[tuple[Any, str]]:
    for path in local_paths(pattern):
        name = path.lower()
        if name.endswith(".parquet"):
            yield from _parquet_rows(path)
        elif name.endswith(".json") and _starts_with_bracket(path):
            yield from _json_array_rows(path)
        else:
            yield from _jsonl_rows(path)


def _jsonl_rows(path: str) -> Iterator[tuple[Any, str]]:
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            yield orjson.loads(line), f"{path}:{number}"
        except orjson.JSONDecodeError as exc:
            yield (
                InputError(
                    f"line is not JSON ({exc})", kind="bad_json", hint="fix or remove the line"
                ),
                f"{path}:{number}",
            )


def _starts_with_bracket(path: str) -> bool:
    with open_binary(path) as fh:
        return fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"["


def _json_array_rows(path: str) -> Iterator[tuple[Any, str]]:
    """A JSON array is parsed whole (JSON has no cheap streaming); prefer JSONL when large."""
    with open_binary(path) as fh:
        try:
            items = orjson.loads(fh.read())
        except orjson.JSONDecodeError as exc:
            raise ConfigError(
                f"{path} is not valid JSON: {exc}", hint="fix the file, or convert it to JSONL"
            ) from exc
    for k, item in enumerate(items):
        yield item, f"{path}[{k}]"


def _parquet_rows(path: str) -> Iterator[tuple[Any, str]]:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as pf:
        k = 0
        for batch in pf.iter_batches(batch_size=PARQUET_BATCH):
            for item in batch.to_pylist():
                yield item, f"{path}#{k}"
                k += 1


def _hf_rows(spec: SourceSpec) -> Iterator[tuple[Any, str]]:
    for item in load_hf(spec):
        yield item, ""


def load_hf(spec: SourceSpec) -> Any:
    """The dataset as an iterable of dicts; streamed unless the recipe says `streaming: false`.

    A directory written by `Dataset.save_to_disk` loads with `load_from_disk`. Hub errors are
    mapped to one ConfigError here, with the likely fixes.
    """
    import datasets

    where = f"{spec.hf}" + (f" ({spec.config})" if spec.config else "")
    try:
        if Path(os.path.expanduser(spec.hf or "")).joinpath("dataset_info.json").is_file():
            loaded = datasets.load_from_disk(os.path.expanduser(spec.hf or ""))
            if isinstance(loaded, datasets.DatasetDict):
                loaded = loaded[spec.split]
            return loaded
        kwargs: dict[str, Any] = {"split": spec.split, "streaming": spec.streaming}
        for key in ("revision", "data_files"):
            if getattr(spec, key) is not None:
                kwargs[key] = getattr(spec, key)
        if os.environ.get("HF_TOKEN"):
            kwargs["token"] = os.environ["HF_TOKEN"]
        return datasets.load_dataset(spec.hf, spec.config, **kwargs)
    except (OSError, ValueError, KeyError) as exc:  # not found, gated, offline, bad split
        raise ConfigError(
            f"source {spec.name!r}: cannot load dataset {where}: {exc}",
            hint="check hf/config/split/revision; set HF_TOKEN for gated datasets",
        ) from exc
