"""The target's probability of each answer token under the run's own sampling, from a
teacher-forced pass of the target loaded here (`score --target-model`), for the sampled rows
whose run kept no logprobs of the draw.

A sampled estimate needs p(x), the target's probability of each answer token under the
distribution it was drawn from (sampled.py). The engines give it with `generate --logprobs`,
but the embedded llama.cpp server (llama-cpp-python) returns the raw model's (the draw only
at temperature 1 without top-k/top-p), and builds them over the whole vocabulary in Python,
which makes generation 5-10x slower. When the target is a GGUF regen can load (the embedded
model is: its server and this pass run the same file on the same llama.cpp), its logits at
every answer position give p at the run's temperature, top-k and top-p, applied in the order
of the engine that drew the answer (sampled.ORDERS: llama.cpp's is top-k, top-p at
temperature 1, then the temperature; checked against llama.cpp's own sampler chain).

The pass decodes the prompt in batches and the answer one token at a time, as the server
did, the next token of several rows in one step (llama_target_pass.py): the figures are the
server's own (equal to its --logprobs to 5e-6), once per draft that samples (a GGUF or a
Hugging Face draft model).

Which rows: a sampled one (temperature above 0) whose logprobs are missing or are not those of
the draw. A row whose engine logprobs fit keeps them (a fleet's model may be served at another
precision than a local file). A row the pass cannot redo (the temperature not recorded, a
min_p or a penalty it does not model, a token outside top-k/top-p) is skipped with the reason.
Greedy rows need no p: the draft's argmax is matched as before.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from regen.errors import ConfigError, InputError
from regen.score.checkpoints.hidden_draft import HiddenStateDraft
from regen.score.llama_draft import DEFAULT_CONTEXT, GGUFRecipe, LlamaDraft
from regen.score.llama_target_pass import Job, RowsPass
from regen.score.sampled import drawn_logprobs
from regen.score.tokens import TEACHER_FORCED, Sink, TokenRow

FLAG = "--target-model"
BLOCK = 16  # logits a row holds before their probabilities are taken
SKIPPED = "target_probs_not_drawn"  # a row the target's pass cannot redo


def needs_target(row: TokenRow) -> bool:
    """A sampled row without the target's logprobs of its draw."""
    return not row.drawn.greedy and (row.logprobs is None or row.drawn.logprobs_fit() is not None)


def why_not(row: TokenRow) -> str | None:
    """Why the target's pass cannot give this row's drawn probabilities, or None."""
    if row.drawn.temperature is None:
        return "the answer was drawn at the server's default temperature, not recorded"
    if row.drawn.others is not None:
        return f"{row.drawn.others}; the target's pass applies temperature, top-k and top-p only"
    return None


@dataclass(frozen=True)
class TargetRecipe:
    """What a worker needs to open the same draft with the same target (score/spread.py)."""

    draft: GGUFRecipe
    target: GGUFRecipe

    def open(self) -> WithTarget:
        return WithTarget(self.draft.open(), self.target.open())


def target_logprobs(rows_pass: RowsPass, rows: list[TokenRow]) -> list[list[float]]:
    """log p of each answer token of each row under its answer's sampling, from one pass of
    the rows side by side (llama_target_pass.py); `BLOCK` positions' logits held a row."""
    import numpy as np

    out: list[list[float]] = [[] for _ in rows]
    held: list[list[Any]] = [[] for _ in rows]

    def flush(k: int) -> None:
        row, done = rows[k], len(out[k])
        tokens = row.ids[row.start + done : row.start + done + len(held[k])]
        out[k].extend(drawn_logprobs(np.stack(held[k]), tokens, row.drawn).tolist())
        held[k].clear()

    for k, logits in rows_pass.logits([Job(r.ids, r.start) for r in rows]):
        held[k].append(logits.copy())  # the view is overwritten by the next step
        if len(held[k]) == BLOCK:
            flush(k)
    for k in range(len(rows)):
        if held[k]:
            flush(k)
    return out


class WithTarget:
    """A draft that samples from its own q (a GGUF or a Hugging Face draft model) whose
    sampled rows without the target's logprobs of the draw get them from the target's own
    pass; the draft then scores them as a draft that samples: min(1, q/p) per token."""

    def __init__(self, draft: Any, target: LlamaDraft) -> None:
        self.draft, self.target = draft, target
        self.name = draft.name
        self.rows_pass: RowsPass | None = None

    @property
    def identity(self) -> str:
        return self.draft.identity

    @property
    def target_identity(self) -> str:
        """Kept in the results' identity: rows scored with the target's pass never mix with
        rows scored without it."""
        return self.target.identity

    @property
    def recipe(self) -> TargetRecipe | None:
        """None for a draft that runs in this process only (a Hugging Face one)."""
        draft = getattr(self.draft, "recipe", None)
        return None if draft is None else TargetRecipe(draft, self.target.recipe)

    def check(self, tok: Any) -> None:
        self.draft.check(tok)
        self.target.check(tok)

    def fits(self, row: TokenRow) -> bool:
        return self.draft.fits(row) and self.target.fits(row)

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        if self.rows_pass is None:  # kept: a worker scores its rows in several calls
            self.rows_pass = RowsPass(self.target.llm)
        self.draft.run(self._filled(rows, sink, self.rows_pass), sink)

    def _filled(
        self, rows: Iterable[TokenRow], sink: Sink, rows_pass: RowsPass
    ) -> Iterator[TokenRow]:
        """The rows in their order, each that needs the target's p with it; those are
        gathered into groups that one pass decodes side by side (the rows after one wait
        for its group, so the rows file is in the same order however they were grouped)."""
        held: list[tuple[TokenRow, InputError | None]] = []
        group: list[TokenRow] = []
        for row in rows:
            why = why_not(row) if needs_target(row) else None
            if needs_target(row) and why is None:
                jobs = [Job(r.ids, r.start) for r in group]
                if group and not rows_pass.fits(jobs, Job(row.ids, row.start)):
                    yield from self._release(held, group, sink, rows_pass)
                    held, group = [], []
                group.append(row)
            elif not held and why is None:
                yield row
                continue
            held.append(
                (row, None if why is None else InputError(f"{row.label}: {why}", kind=SKIPPED))
            )
        yield from self._release(held, group, sink, rows_pass)

    def _release(
        self,
        held: list[tuple[TokenRow, InputError | None]],
        group: list[TokenRow],
        sink: Sink,
        rows_pass: RowsPass,
    ) -> Iterator[TokenRow]:
        filled = {id(r): f for r, f in zip(group, self._fill(group, rows_pass), strict=True)}
        for row, err in held:
            out = err or filled.get(id(row), row)
            if isinstance(out, InputError):
                sink(row, out)
            else:
                yield out

    def _fill(self, group: list[TokenRow], rows_pass: RowsPass) -> list[TokenRow | InputError]:
        out: list[TokenRow | InputError] = []
        for row, logprobs in zip(
            group, target_logprobs(rows_pass, group) if group else [], strict=True
        ):
            if -math.inf in logprobs:
                at = logprobs.index(-math.inf)
                out.append(
                    InputError(
                        f"{row.label}: answer token {at} is outside the run's top-k/top-p in the "
                        "target's pass, so it is not the token drawn"
                        + (
                            " (re-tokenised: generate with --return-token-ids)"
                            if row.retokenized
                            else " (is --target-model the model the run was generated with?)"
                        ),
                        kind=SKIPPED,
                    )
                )
                continue
            drawn = replace(row.drawn, logprobs="processed")  # now those of the draw
            out.append(replace(row, logprobs=logprobs, drawn=drawn, target_probs=TEACHER_FORCED))
        return out

    def close(self) -> None:
        if self.rows_pass is not None:
            self.rows_pass.close()
        self.draft.close()


def target_path(spec: str) -> Path:
    """`--target-model embedded` or PATH.gguf."""
    if spec == "embedded":
        from regen.embedded_model import default_model_path

        return default_model_path()
    path = Path(spec).expanduser()
    if path.suffix != ".gguf":
        raise ConfigError(
            f"{FLAG} {spec}: not a .gguf file or `embedded`",
            hint="pass the GGUF the run was generated with (`embedded` for the embedded model)",
        )
    return path


@contextlib.contextmanager
def open_target(spec: str | None, drafts: list[Any], threads: int = 2) -> Iterator[Any]:
    """The GGUF target named by --target-model for the drafts among `drafts` that sample
    (GGUF and Hugging Face draft models), closed on exit; None when none is named, or when
    the flag names the target of an EAGLE-3 or DFlash draft (its hidden states:
    hidden_draft.py) and no draft that samples is scored."""
    if spec is None or (_reads_hidden_states(drafts) and not _samples(drafts)):
        yield None
        return
    if not _samples(drafts):
        raise ConfigError(
            f"{FLAG} serves a draft model that samples (--draft PATH.gguf or a Hugging Face "
            "draft folder) or an EAGLE-3 or DFlash draft; the n-gram and a served draft "
            "propose one token, scored without the target's probabilities",
            hint=f"pass --draft PATH.gguf or --draft DIR, or leave out {FLAG}",
        )
    if _reads_hidden_states(drafts) and Path(spec).expanduser().is_dir():
        yield None  # a Hugging Face folder: for the hidden states only
        return
    target = LlamaDraft(target_path(spec), n_ctx=DEFAULT_CONTEXT, threads=threads, flag=FLAG)
    try:
        yield target
    finally:
        target.close()


def with_target(drafts: list[Any], target: LlamaDraft | None) -> list[Any]:
    """Every draft that samples paired with the target; the others (n-gram, a served draft,
    a draft that reads hidden states) need no target probabilities."""
    if target is None:
        return drafts
    return [WithTarget(d, target) if _sampling(d) else d for d in drafts]


def _sampling(draft: Any) -> bool:
    """A draft model that proposes from its own q (`samples`): a GGUF or a Hugging Face
    one; an EAGLE-3 or DFlash head reads the target's hidden states instead."""
    return getattr(draft, "samples", False) and not isinstance(draft, HiddenStateDraft)


def _samples(drafts: list[Any]) -> bool:
    return any(_sampling(d) for d in drafts)


def _reads_hidden_states(drafts: list[Any]) -> bool:
    return any(isinstance(d, HiddenStateDraft) for d in drafts)
