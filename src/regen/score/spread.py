"""`score`'s rows over workers: each worker tokenises its rows and runs its own copy of the
draft on them, and the results come back in read order (regen.parallel), so the rows file
and the report are the same whatever the number of workers.

A draft that runs in a worker is given by a recipe (`Draft.recipe`): a GGUF draft's path,
context and threads (each worker loads the model once; the same threads as in one process,
so its arithmetic, and its guesses, are the same), the n-gram draft itself. A draft served
by a fleet has none: its rows are already spread over the servers, and stay in this process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from regen.errors import InputError
from regen.finished.encode import Encoder
from regen.finished.record import Completion
from regen.score.results import skipped_line
from regen.score.rows import groups_of
from regen.score.tokens import TokenRow, token_row

if TYPE_CHECKING:
    from regen.score.outcome import Outcome

Skipped = dict[str, Any]  # a rows-file line saying why a row is not scored
Scored = Union["Outcome", InputError]  # what a draft hands its sink (outcome.py), or why not


@dataclass(frozen=True)
class ScoreJob:
    encoder: Encoder
    recipe: Any  # has open() -> Draft

    @property
    def fork_safe(self) -> bool:
        """Whether a copy of this process can run the draft (executors/pool.py)."""
        return getattr(self.recipe, "fork_safe", True)


_opened: dict[Any, Any] = {}  # recipe -> the draft, opened once per worker


def close_opened() -> None:
    """Close the drafts this process opened for `score_rows`. A worker's are freed with it;
    but a run of a few rows is scored in this process (executors/pool.py), and a draft left
    open there would hold its model until exit, where llama-cpp-python's finaliser fails on
    modules already torn down."""
    while _opened:
        _opened.popitem()[1].close()


def row_or_skip(completion: Completion, encoder: Encoder, draft: Any) -> TokenRow | Skipped:
    """The row's tokens, or the line that says why it cannot be scored (counted, not lost)."""
    key, groups = completion.key, groups_of(completion)
    try:
        # only a draft that samples (a GGUF's) reads the target's logprobs (sampled.py)
        reads = getattr(draft, "samples", False)
        row = token_row(completion, encoder, groups, reads_logprobs=reads)
    except InputError as err:
        return skipped_line(key, groups, err.kind, err.message)
    if not draft.fits(row):
        why = f"{len(row.ids)} tokens do not fit the draft's context"
        return skipped_line(key, groups, "too_long", why)
    return row


def score_rows(job: ScoreJob, raws: list[dict]) -> list[Skipped | tuple[TokenRow, Scored]]:
    """For each completion: its skipped line, or its row and the draft's outcome."""
    draft = _opened.get(job.recipe)
    if draft is None:
        draft = _opened[job.recipe] = job.recipe.open()
    out: list[Skipped | tuple[TokenRow, Scored]] = []
    rows: list[TokenRow] = []  # run together (a target's pass decodes them side by side)

    def run() -> None:
        draft.run(rows, lambda r, matches: out.append((r, matches)))  # in their order
        rows.clear()

    for raw in raws:
        row = row_or_skip(Completion(raw), job.encoder, draft)
        if isinstance(row, TokenRow):
            rows.append(row)
            continue
        run()
        out.append(row)
    run()
    return out
