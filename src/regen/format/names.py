"""Shard names: what a shard's file name says about the session that wrote it.

`part-<stamp>-<host>-<pid+random>[-s0003of0008][-i<12 hex>]-<seq>.jsonl[.zst]`: sortable by
start time, unique per writing session, and carrying the `--shard` part that wrote it and the
first 12 hex digits of the xxh3-128 of the prompt file its records were read from, so that a
resume can trust the records' input line numbers (and a rebuilt sidecar learns both from here).
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from regen.format.part import Part

INPUT_ID_CHARS = 12
_PART_TAG = re.compile(r"s(\d+)of(\d+)")
_INPUT_TAG = re.compile(rf"i([0-9a-f]{{{INPUT_ID_CHARS}}})")


def writer_tag(part: str = "", input_digest: str = "") -> str:
    """Unique per writing session, sortable by start time. The random part keeps two sessions
    of one process (library use) from sharing a name: in a bucket, a name is overwritten.
    `part`: `Part.name` ("0003-of-0008") with --shard; `input_digest`: the prompt file's
    xxh3-128 hex digest."""
    host = socket.gethostname().split(".")[0].replace("-", "_") or "host"
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    tag = f"{stamp}-{host}-{os.getpid()}{os.urandom(3).hex()}"
    if part:
        tag += "-s" + part.replace("-of-", "of")
    if input_digest:
        tag += "-i" + input_digest[:INPUT_ID_CHARS]
    return tag


@dataclass(frozen=True)
class ShardOrigin:
    """What a shard's name says about its writer; None where an older name does not say."""

    part: str | None  # as `Part.name`; "" for a whole-input run that named its input
    input_id: str | None  # the first INPUT_ID_CHARS hex digits of the input's xxh3-128


def written_by(name: str, part: Part, records: Callable[[], Iterable[dict]]) -> bool:
    """Whether shard `name` was written by a process running `part`: its name says, or for a
    name from before parts were named, its records do (all of them this part's)."""
    if part.whole:
        return True
    origin = shard_origin(name).part
    if origin is not None:
        return origin == part.name
    return all(part.owns(r.get("id"), r.get("line") or 0) for r in records())


def shard_origin(name: str) -> ShardOrigin:
    tags = name.split("-")[4:-1]  # part-<stamp>-<host>-<pid+random>-[tags-]<seq>.jsonl
    part = next((m for t in tags if (m := _PART_TAG.fullmatch(t))), None)
    found = next((m.group(1) for t in tags if (m := _INPUT_TAG.fullmatch(t))), None)
    if part is not None:
        return ShardOrigin(f"{part.group(1)}-of-{part.group(2)}", found)
    return ShardOrigin("" if found else None, found)
