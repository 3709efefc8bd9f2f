"""What a worker does with a batch of a run's lines for `export`: everything about a row
that depends on that row alone.

Parse, encode (from the stored token ids where they cover the sample), apply the filters,
judge the sample for the card's check, build the trainer's row and its dedup key, and note
what the summary counts. The calling process folds the results in read order (runner.py):
the score selection, dedup, splits and files, which depend on every row before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from regen.errors import InputError
from regen.export.format_base import Format, named
from regen.export.merge import TOKEN_COLUMNS, content_key
from regen.export.select import Filters
from regen.export.summary import TEMPLATE_DROPS
from regen.finished.encode import Encoder
from regen.finished.mask import Encoded
from regen.finished.read import parse_line
from regen.finished.record import Completion, SampleKey, is_ids
from regen.finished.verdict import Judge
from regen.jsonio import canonical


@dataclass(frozen=True)
class ExportJob:
    fmt: Format
    encoder: Encoder | None
    filters: Filters
    judge: Judge | None  # judges each sample for the card's check (check/card.py)
    count_tokens: bool  # count the supervised token ids (the draft vocabulary)
    columnar: bool = False  # the rows go to Parquet: hand token columns over as arrays


@dataclass(frozen=True)
class Notes:
    """What the summary and the card count of an exported row."""

    with_reasoning: bool
    template_dropped: tuple[str, ...]
    without_system: bool
    sampling: str  # canonical JSON of the sampling parameters
    thinking: str
    with_source_turns: bool
    masked: tuple[np.ndarray, np.ndarray] | None  # supervised ids: (distinct ids, counts)


@dataclass(frozen=True)
class Prepared:
    """One line's outcome: `dropped` names why it is not a row, else the row and its facts."""

    dropped: str | None = None
    key: SampleKey = ("", 0)
    category: str = ""
    row: dict[str, Any] | None = None
    content: int = 0  # the row's content key, for dedup
    result: Any = None  # the judge's result, folded into the card's verdict
    notes: Notes | None = None
    problem: str | None = None  # why the trainer would skip the row
    differs: str | None = None  # why the trainer's render would differ from ours

    @property
    def named(self) -> dict[str, Any]:
        return {"id": self.key[0], "sample": self.key[1]}


def prepare_lines(job: ExportJob, lines: list[bytes]) -> list[Prepared]:
    # Parquet takes the ids of a sample built from its stored ids as arrays: read them so
    id_arrays = job.columnar and job.encoder is not None and job.encoder.stored_ids
    parsed = [parse_line(line, id_arrays) for line in lines]
    completions = [p for p in parsed if isinstance(p, Completion)]
    encoded: list[Encoded | InputError | None] = [None] * len(completions)
    if job.encoder is not None and completions:
        encoded = list(job.encoder.encode_batch(completions))
    found = iter(zip(completions, encoded, strict=True))
    out = []
    for item in parsed:
        if not isinstance(item, Completion):
            out.append(Prepared(dropped=item.kind))
            continue
        completion, enc = next(found)
        if isinstance(enc, InputError):
            out.append(Prepared(dropped=enc.kind))  # an all-zero mask is never exported
        else:
            out.append(prepare_one(job, completion, enc))
    return out


def prepare_one(job: ExportJob, completion: Completion, enc: Encoded | None) -> Prepared:
    reason = job.filters.reason_to_drop(completion, enc) or job.fmt.leaves_out(completion)
    if reason:
        return Prepared(dropped=reason)
    fmt, encoder = job.fmt, job.encoder
    result = None
    if job.judge is not None and encoder is not None and enc is not None:
        degenerate_at = job.filters.degenerate_at
        result = job.judge.judge(completion, enc, encoder.specials, degenerate_at)
    row = fmt.row(completion, enc)
    if job.columnar:
        row = as_arrays(row)  # hashed as its lists (jsonio.canonical), a third of the time
    return Prepared(
        key=completion.key,
        category=completion.category,
        row=row,
        content=content_key(row),
        result=result,
        notes=notes_of(job, completion, enc),
        problem=fmt.problem(row),
        differs=render_differs(fmt, row, enc, encoder),
    )


def as_arrays(row: dict[str, Any]) -> dict[str, Any]:
    """The token columns as int64 arrays: Arrow takes an array in one copy, where a list of
    Python ints costs it a conversion per int (most of a Parquet export's time in the
    writing process); the values and the file are the same."""
    return {
        k: int64_array(v) if k in TOKEN_COLUMNS and is_ids(v) and len(v) else v
        for k, v in row.items()
    }


def int64_array(values: list[int] | np.ndarray) -> np.ndarray:
    """A list of ints as an int64 array. A mask's 0s and 1s go through `bytes` (a third of
    numpy's time reading Python ints one by one); any other value through numpy."""
    if isinstance(values, np.ndarray):
        return values.astype(np.int64, copy=False)  # built from stored ids read as arrays
    try:
        return np.frombuffer(bytes(values), dtype=np.uint8).astype(np.int64)
    except ValueError:  # a value outside 0..255: a token id
        return np.fromiter(values, dtype=np.int64, count=len(values))


def notes_of(job: ExportJob, completion: Completion, enc: Encoded | None) -> Notes:
    written = completion.regenerated
    source_turns = any(
        m.get("role") == "assistant" and i not in written for i, m in enumerate(completion.messages)
    )
    masked = None
    if job.count_tokens and enc is not None:
        ids = np.array(enc.input_ids, dtype=np.int64)
        supervised = np.concatenate([ids[a:b] for a, b in enc.spans] or [ids[:0]])
        masked = np.unique(supervised, return_counts=True)
    flags = enc.flags if enc is not None and job.fmt.needs_tokenizer else ()
    return Notes(
        with_reasoning=bool(completion.reasoning.strip()),
        template_dropped=tuple(f for f in flags if f in TEMPLATE_DROPS),
        without_system=completion.messages[0].get("role") != "system",
        sampling=canonical((completion.raw.get("meta") or {}).get("sampling")),
        thinking=completion.thinking,
        with_source_turns=source_turns,
        masked=masked,
    )


def render_differs(
    fmt: Format, row: dict, enc: Encoded | None, encoder: Encoder | None
) -> str | None:
    """For the conversation target rendered by the trainer (SpecForge): does its render of
    the row differ from regen's tokenised one? Only known with a tokenizer."""
    check = getattr(fmt, "render_differs", None)
    if check is None or enc is None or encoder is None:
        return None
    return check(row, enc, encoder.tok)


def needs_render(fmt: Format) -> bool:
    """A target whose render is compared with the trainer's needs regen's render of every
    row; the others can take a sample's ids and mask from its stored token ids."""
    return getattr(fmt, "render_differs", None) is not None


__all__ = ["ExportJob", "Prepared", "named", "prepare_lines"]
