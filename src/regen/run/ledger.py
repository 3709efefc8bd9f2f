"""Read the ledger: which (id, sample) keys are already finished, from the output files alone.

Run at start-up under the run lock, so every plain `.jsonl` shard found belongs to a writer
that is gone: its torn last line (if any) is cut off and the shard is sealed. Keys come from a
shard's sidecar when it still matches, else from the shard itself.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from regen.errors import RunStateError
from regen.jsonio import ZST_SUFFIX, iter_lines
from regen.records import Key, record_key
from regen.run.keyset import KeySet
from regen.run.layout import COMPLETIONS, ERRORS, OutputLayout
from regen.run.writer import read_sidecar, seal_shard, write_sidecar
from regen.scale.partition import WHOLE, Part

log = logging.getLogger("regen.run")


@dataclass
class Ledger:
    done: KeySet = field(default_factory=KeySet)  # in completions/ (~9 bytes a key)
    failed: KeySet = field(default_factory=KeySet)  # in errors/
    bad_lines: set[int] = field(default_factory=set)  # input lines recorded as unusable
    completions: int = 0
    errors: int = 0
    duplicates: int = 0
    repaired: list[str] = field(default_factory=list)
    part: Part = WHOLE

    def finished(self, key: Key) -> bool:
        return key in self.done or (self.errors > 0 and key in self.failed)


def scan(
    layout: OutputLayout,
    *,
    compress: bool,
    remote: Iterable[tuple[str, list]] = (),
    part: Part = WHOLE,
) -> Ledger:
    """`remote`: (kind, items) for shards already committed elsewhere (a bucket) and not in
    `layout`; items are (id, sample) pairs for completions and whole records for errors.
    `part`: only the keys of this part of the input are kept (other parts are other
    processes' business), which also divides the ledger's memory by the number of parts."""
    ledger = Ledger(part=part)
    for kind, items in remote:
        if kind == COMPLETIONS:
            _add_keys(items, ledger)
        else:
            _add_error_records(items, ledger)
    for kind in (COMPLETIONS, ERRORS):
        folder = layout.root / kind
        _remove_leftovers(folder)
        for shard in layout.shard_files(kind):
            # A shard whose sidecar still matches it was sealed whole; any other plain shard
            # was still being written when its process stopped, and may end in a torn line.
            keys = read_sidecar(shard)
            if keys is None and shard.name.endswith(".jsonl"):
                shard, keys = _recover_plain(shard, ledger, compress and kind == COMPLETIONS)
            if kind == COMPLETIONS:
                _add_completions(shard, keys, ledger)
            elif shard.exists():
                _add_errors(shard, ledger)
    _ = len(ledger.done), len(ledger.failed)  # merge now: lookups follow, and repeats are counted
    ledger.duplicates += ledger.done.duplicates + ledger.failed.duplicates
    if ledger.duplicates:
        log.error("%d duplicate keys found in the output files", ledger.duplicates)
    return ledger


def _remove_leftovers(folder: Path) -> None:
    """Half-written temporary files from a killed seal, and plain shards whose compressed
    copy was already renamed into place (the copy is whole; the plain one is redundant)."""
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        half_written = path.name.startswith(".") and ".tmp" in path.name
        compressed_twin = path.with_name(path.name + ZST_SUFFIX)
        if half_written or (path.name.endswith(".jsonl") and compressed_twin.exists()):
            path.unlink()


def _recover_plain(
    shard: Path, ledger: Ledger, compress: bool
) -> tuple[Path, list[tuple[str, int | None]]]:
    keys = list(_repair(shard, ledger))
    if not keys:
        shard.unlink()
        return shard, keys
    return seal_shard(shard, keys, compress), keys


def _repair(shard: Path, ledger: Ledger) -> Iterator[tuple[str, int | None]]:
    """Yield the keys of whole lines; cut a torn or unparseable last line off the file."""
    good_end = 0
    torn_at: int | None = None
    with open(shard, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            if torn_at is not None:
                raise RunStateError(
                    f"{shard} line {torn_at} is corrupt but is not the last line",
                    hint="this is not a crash leftover; inspect the file, then move it aside",
                )
            try:
                if not line.endswith(b"\n"):
                    raise ValueError("no newline")
                record = orjson.loads(line)
            except ValueError:
                torn_at = number
                continue
            good_end += len(line)
            yield record.get("id"), record.get("sample")
    if torn_at is not None:
        os.truncate(shard, good_end)
        ledger.repaired.append(f"{shard.name}: cut a torn line {torn_at}")


def _add_completions(shard: Path, keys: list | None, ledger: Ledger) -> None:
    if keys is None:  # a compressed shard whose sidecar is missing or stale
        keys = [(r["id"], r["sample"]) for r in _records(shard)]
        write_sidecar(shard, keys)
    _add_keys(keys, ledger)


def _add_keys(keys: Iterable, ledger: Ledger) -> None:
    """A shard's keys go in as one array; repeats are counted when the set merges them."""
    part = ledger.part
    hashed = [
        record_key(prompt_id, sample)  # type: ignore[arg-type]
        for prompt_id, sample in keys
        if part.whole or part.owns_id(str(prompt_id))
    ]
    ledger.done.add_array(np.array(hashed, dtype=np.uint64))
    ledger.completions += len(hashed)


def _add_errors(shard: Path, ledger: Ledger) -> None:
    _add_error_records(_records(shard), ledger)


def _add_error_records(records: Iterable[dict], ledger: Ledger) -> None:
    for record in records:
        if not ledger.part.owns(record.get("id"), record.get("line") or 0):
            continue
        ledger.errors += 1
        if record.get("id") is None or record.get("sample") is None:
            ledger.bad_lines.add(record["line"])
            continue
        key = record_key(record["id"], record["sample"])
        if key in ledger.done:  # repeats within errors/ are counted by the set itself
            ledger.duplicates += 1
        ledger.failed.add(key)


def _records(shard: Path) -> Iterator[dict]:
    for _, line in iter_lines(shard):
        if line.strip():
            yield orjson.loads(line)
