"""Work spread over workers, results in the order the work came in.

`check`, `export` and `score` turn each row into a result that depends on that row alone
(its tokens, its mask, its verdict), then fold the results in read order (counts, dedup,
files). The first part is what `Workers` spreads: `map(state, work, items)` calls
`work(state, item)` for every item and yields the results in the items' order, whichever
worker finished first, so what is written is the same bytes whatever the number of workers.
`state` (the tokenizer, the options) is handed to each worker once, not with every item.

This module holds the contract and the in-process case; the executors (`regen.executors.
pool`) give the same contract over local processes and over Ray, and a verb is handed one
by its caller, never choosing itself. One worker is one core: the Rust tokenizer's own
threads are turned off inside a worker, so N workers use N cores and not N times all.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")
Work = Callable[[Any, T], R]

BATCH_ROWS = 32  # rows per item: enough to amortise a hand-off, small enough to keep all busy


class Workers(Protocol):
    count: int

    def map(self, state: Any, work: Work, items: Iterable[T]) -> Iterator[R]:
        """`work(state, item)` for each item, yielded in the items' order."""
        ...


def cores() -> int:
    """The cores this process may run on (a container's or a scheduler's limit included)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


@contextlib.contextmanager
def one_core() -> Iterator[None]:
    """The Rust tokenizer spreads a batch over every core unless told not to (it reads this
    variable at each call); a worker is one core."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


class InProcess:
    """One worker: this process, the items one after the other."""

    count = 1

    def map(self, state: Any, work: Work, items: Iterable[T]) -> Iterator[R]:
        with one_core():
            for item in items:
                yield work(state, item)


_installed: Any = None  # a worker process's state, handed over once when it starts


def install(state: Any) -> None:
    """A worker process's start: keep the state, and use one core."""
    global _installed
    _installed = state
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def call_installed(work: Work, item: Any) -> Any:
    return work(_installed, item)


def batches(rows: Iterable[T], size: int = BATCH_ROWS) -> Iterator[list[T]]:
    it = iter(rows)
    while batch := list(islice(it, size)):
        yield batch


def flat_map(
    workers: Workers | None,
    state: Any,
    work: Callable[[Any, list[T]], list[R]],
    rows: Iterable[T],
    size: int = BATCH_ROWS,
) -> Iterator[R]:
    """Rows in batches to the workers (in this process when None), results row by row."""
    for results in (workers or InProcess()).map(state, work, batches(rows, size)):
        yield from results


def flat_map_with_rows(
    workers: Workers | None,
    state: Any,
    work: Callable[[Any, list[T]], list[R]],
    rows: Iterable[T],
    size: int = BATCH_ROWS,
) -> Iterator[tuple[T, R]]:
    """The same, each result with its row: the batches handed out are held until their
    results are back (a few per worker), not the whole input."""
    sent: deque[list[T]] = deque()

    def handed_out() -> Iterator[list[T]]:
        for batch in batches(rows, size):
            sent.append(batch)
            yield batch

    for results in (workers or InProcess()).map(state, work, handed_out()):
        yield from zip(sent.popleft(), results, strict=True)
