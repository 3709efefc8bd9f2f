"""The records that flow through a generation run, and nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import xxhash

Key = int  # xxh3_64 of "id\x1fsample": compact enough to hold millions in memory


def record_key(prompt_id: str, sample: int) -> Key:
    """The exactly-once key of one (prompt, sample). 64 bits: a collision among 10^7 keys
    has odds of about 3e-6, far below any other failure; the files keep the full id."""
    return xxhash.xxh3_64_intdigest(f"{prompt_id}\x1f{sample}".encode())


@dataclass(slots=True)
class Prompt:
    """One usable input record: the conversation up to (not including) the answer to make."""

    id: str
    line: int
    messages: list[dict]
    tools: list[dict] | None = None
    sampling: dict[str, Any] | None = None  # per-record overrides
    source: dict[str, Any] | None = None
    category: str | None = None


@dataclass(slots=True)
class BadLine:
    """An input line that cannot become a Prompt; it goes to errors/ with its line number."""

    line: int
    kind: str
    message: str
    id: str | None = None


@dataclass(slots=True)
class Finished:
    """A line whose every sample is already in the output files: not parsed any further."""

    id: str
    line: int


@dataclass(slots=True)
class WorkItem:
    """One (prompt, sample) to generate."""

    prompt: Prompt
    sample: int
