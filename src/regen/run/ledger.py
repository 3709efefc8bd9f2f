"""Read the ledger: which (id, sample) keys are already finished, from the output files alone.

Run at start-up under the run lock, so every plain `.jsonl` shard of this run's part found
belongs to a writer that is gone: its torn last line (if any) is cut off and the shard is
sealed. (Another part's plain shard may still be being written: it is left alone.) Keys come
from a shard's sidecar when it still matches, else from the shard itself.

Besides the keys, the scan fills a `LineMap` from the records' input line numbers, which lets
the input pass skip finished lines without parsing them.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from regen.errors import RunStateError
from regen.format.layout import COMPLETIONS, ERRORS, OutputLayout
from regen.format.names import INPUT_ID_CHARS, shard_origin
from regen.format.part import WHOLE, Part
from regen.format.sidecar import (
    Entry,
    RemoteShard,
    ShardKeys,
    read_sidecar,
    record_line,
    write_sidecar,
)
from regen.format.writer import seal_shard
from regen.jsonio import ZST_SUFFIX, iter_lines
from regen.records import BadLine, Key, record_key
from regen.run.keyset import KeySet
from regen.run.linemap import LineMap

FIRST_BAD_KEPT = 3  # unusable lines quoted if the input turns out mostly unusable

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
    lines: LineMap = field(default_factory=LineMap)  # which input lines need nothing more
    first_bad: list[BadLine] = field(default_factory=list)  # the first unusable lines recorded

    def finished(self, key: Key) -> bool:
        return key in self.done or (self.errors > 0 and key in self.failed)


def scan(
    layout: OutputLayout,
    *,
    compress: bool,
    remote: Iterable[RemoteShard] = (),
    part: Part = WHOLE,
    input_digests: Iterable[str] = (),
) -> Ledger:
    """`remote`: shards already committed elsewhere (a bucket) and not in `layout`.
    `part`: only the keys of this part of the input are kept (other parts are other
    processes' business), which also divides the ledger's memory by the number of parts.
    `input_digests`: xxh3-128s of the prompt files whose line numbers are this input's (this
    one, and earlier ones it only appends to); records of another input (or whose shard does
    not say) keep the line map from being trusted."""
    ledger = Ledger(part=part)
    here = {digest[:INPUT_ID_CHARS] for digest in input_digests}
    if not here:
        ledger.lines.distrust("the prompt file's digest was not given")
    for kind, name, payload in remote:
        same_input = shard_origin(name).input_id in here
        if kind == COMPLETIONS:
            _add_keys(payload, ledger, same_input, name)  # type: ignore[arg-type]
        else:
            _add_error_records(payload, ledger, same_input, name)  # type: ignore[arg-type]
    for kind in (COMPLETIONS, ERRORS):
        folder = layout.root / kind
        _remove_leftovers(folder, part)
        for shard in layout.shard_files(kind):
            origin = shard_origin(shard.name)
            # A shard whose sidecar still matches it was sealed whole; any other plain shard
            # was still being written when its process stopped, and may end in a torn line.
            keys = read_sidecar(shard)
            if keys is None and shard.name.endswith(".jsonl"):
                if origin.part not in (None, part.name):
                    continue  # another part's: its writer may be alive, and its keys not ours
                shard, keys = _recover_plain(shard, ledger, compress and kind == COMPLETIONS)
            same_input = origin.input_id in here
            if kind == COMPLETIONS:
                _add_completions(shard, keys, ledger, same_input)
            elif shard.exists():
                _add_error_records(_records(shard), ledger, same_input, shard.name)
    _ = len(ledger.done), len(ledger.failed)  # merge now: lookups follow, and repeats are counted
    ledger.duplicates += ledger.done.duplicates + ledger.failed.duplicates
    if ledger.duplicates:
        log.error("%d duplicate keys found in the output files", ledger.duplicates)
        ledger.lines.distrust("the output files hold duplicate records")
    return ledger


def _remove_leftovers(folder: Path, part: Part) -> None:
    """Half-written temporary files from a killed seal, and plain shards whose compressed
    copy was already renamed into place (the copy is whole; the plain one is redundant).
    Only this part's: another part may be sealing that very shard right now."""
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if shard_origin(path.name.lstrip(".")).part not in (None, part.name):
            continue
        half_written = path.name.startswith(".") and ".tmp" in path.name
        compressed_twin = path.with_name(path.name + ZST_SUFFIX)
        if half_written or (path.name.endswith(".jsonl") and compressed_twin.exists()):
            path.unlink()


def _recover_plain(shard: Path, ledger: Ledger, compress: bool) -> tuple[Path, ShardKeys]:
    keys = ShardKeys.of(_repair(shard, ledger))
    if not len(keys):
        shard.unlink()
        return shard, keys
    return seal_shard(shard, keys, compress), keys


def _repair(shard: Path, ledger: Ledger) -> Iterator[Entry]:
    """Yield the keys of whole lines; cut a torn or unparseable last line off the file."""
    good_end = 0
    torn_at: int | None = None
    with open(shard, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            if torn_at is not None:
                raise corrupt_line(shard, torn_at)
            try:
                if not line.endswith(b"\n"):
                    raise ValueError("no newline")
                record = orjson.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("not an object")
            except ValueError:
                torn_at = number
                continue
            good_end += len(line)
            yield record.get("id"), record.get("sample"), record_line(record)
    if torn_at is not None:
        os.truncate(shard, good_end)
        ledger.repaired.append(f"{shard.name}: cut a torn line {torn_at}")


def _add_completions(shard: Path, keys: ShardKeys | None, ledger: Ledger, same_input: bool) -> None:
    if keys is None:  # a compressed shard whose sidecar is missing or stale
        keys = ShardKeys.of((r["id"], r["sample"], record_line(r)) for r in _records(shard))
        write_sidecar(shard, keys)
    _add_keys(keys, ledger, same_input, shard.name)


def _add_keys(keys: ShardKeys, ledger: Ledger, same_input: bool, name: str) -> None:
    """A shard's keys go in as one array; repeats are counted when the set merges them."""
    part = ledger.part
    if part.whole:
        owned = np.ones(len(keys), dtype=bool)
    else:
        owned = keys.id_keys % np.uint64(part.count) == np.uint64(part.index)
    mine = keys.record_keys[owned]
    ledger.done.add_array(mine)
    ledger.completions += len(mine)
    if same_input and keys.lines is not None:
        ledger.lines.add_samples(keys.lines[owned])
        ledger.lines.add_nothing_left(keys.lines[~owned])
    elif len(mine):
        ledger.lines.distrust(f"{name} does not say which lines of this input its records are")


def _add_error_records(
    records: Iterable[dict], ledger: Ledger, same_input: bool, name: str
) -> None:
    failed_lines: list[int] = []
    no_work_lines: list[int] = []  # unusable lines of this part, and lines of other parts
    mine = 0
    for record in records:
        line = record_line(record) or 0
        if not ledger.part.owns(record.get("id"), line):
            no_work_lines.append(line)
            continue
        ledger.errors += 1
        mine += 1
        if record.get("id") is None or record.get("sample") is None:
            ledger.bad_lines.add(record["line"])
            no_work_lines.append(line)
            _keep_first_bad(ledger, record)
            continue
        key = record_key(record["id"], record["sample"])
        if key in ledger.done:  # repeats within errors/ are counted by the set itself
            ledger.duplicates += 1
        ledger.failed.add(key)
        failed_lines.append(line)
    if same_input:
        ledger.lines.add_samples(np.array(failed_lines, dtype=np.int64))
        ledger.lines.add_nothing_left(np.array(no_work_lines, dtype=np.int64))
    elif mine:
        ledger.lines.distrust(f"{name} does not say which lines of this input its records are")


def _keep_first_bad(ledger: Ledger, record: dict) -> None:
    error = record.get("error") or {}
    bad = BadLine(record["line"], error.get("type", ""), error.get("message", ""), record["id"])
    ledger.first_bad.append(bad)
    if len(ledger.first_bad) > 2 * FIRST_BAD_KEPT:
        ledger.first_bad = sorted(ledger.first_bad, key=lambda b: b.line)[:FIRST_BAD_KEPT]


def _records(shard: Path) -> Iterator[dict]:
    for number, line in iter_lines(shard):
        if line.strip():
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError:
                raise corrupt_line(shard, number) from None


def corrupt_line(shard: Path, number: int) -> RunStateError:
    """A line that is not a record, before the end of a shard: no crash leaves one there (a
    killed writer tears only the last line), so the run stops and says how to go on."""
    name = shlex.quote(str(shard))
    where = (
        f"decompress it (`zstd -d --rm {name}`), delete line {number} of the .jsonl"
        if shard.name.endswith(ZST_SUFFIX)
        else f"delete that line (`sed -i '{number}d' {name}`)"
    )
    return RunStateError(
        f"{shard} line {number} is not a JSON record, and it is not the last line: not a "
        "crash leftover, an edit or a disk fault",
        hint=f"{where} and run the same command again: the shard's other records are kept, "
        "and a prompt whose record that line was is asked again",
    )
