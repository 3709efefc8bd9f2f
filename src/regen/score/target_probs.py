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
did: llama.cpp's CPU kernels give a batch slightly different logits than single tokens (up to
0.15 nats per token on SmolLM2 between one batch over the answer and the server's figures),
and the step-by-step figures are the server's own (equal to its --logprobs to 5e-6). It costs
about what generating the answer without --logprobs cost, once per GGUF draft.

Which rows: a sampled one (temperature above 0) whose logprobs are missing or are not those of
the draw. A row whose engine logprobs fit keeps them (a fleet's model may be served at another
precision than a local file). A row the pass cannot redo (the temperature not recorded, a
min_p or a penalty it does not model, a token outside top-k/top-p) is skipped with the reason.
Greedy rows need no p: the draft's argmax is matched as before.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from regen.errors import ConfigError, InputError
from regen.score.checkpoints.hidden_draft import HiddenStateDraft
from regen.score.llama_draft import DEFAULT_CONTEXT, GGUFRecipe, LlamaDraft
from regen.score.sampled import ROWS_AT_ONCE, DrawnAt, drawn_logprobs
from regen.score.tokens import TEACHER_FORCED, Sink, TokenRow

FLAG = "--target-model"
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


def target_logprobs(llm: Any, ids: Sequence[int], start: int, drawn: DrawnAt) -> list[float]:
    """log p of each answer token ids[start:] under the answer's sampling, `ROWS_AT_ONCE`
    positions' logits held at a time."""
    import numpy as np

    out: list[float] = []
    block: list[Any] = []

    def flush() -> None:
        tokens = ids[start + len(out) : start + len(out) + len(block)]
        out.extend(drawn_logprobs(np.stack(block), tokens, drawn).tolist())
        block.clear()

    for logits in stepwise(llm, ids, start):
        block.append(logits.copy())  # the view is overwritten by the next decode
        if len(block) == ROWS_AT_ONCE:
            flush()
    if block:
        flush()
    return out


def stepwise(llm: Any, ids: Sequence[int], start: int) -> Iterator[Any]:
    """The logits before each answer token, on an empty KV cache, decoded as llama-cpp-python
    decodes an answer: the prompt `n_batch` tokens at a time, then one token per step. One
    batch over prompt + answer would be faster, but llama.cpp's CPU kernels give a batch
    slightly different logits than single tokens (up to 0.15 nats per token on SmolLM2); this
    way the figures are the server's own (measured: equal to its --logprobs to the bit)."""
    import numpy as np

    ctx, batch, n_vocab = llm._ctx, llm._batch, llm.n_vocab()  # llama-cpp-python's own
    ctx.kv_cache_clear()
    llm.n_tokens = 0
    for at in range(0, start, llm.n_batch):  # logits of the batch's last token only
        batch.set_batch(
            batch=list(ids[at : min(at + llm.n_batch, start)]), n_past=at, logits_all=False
        )
        ctx.decode(batch)
    for pos in range(start, len(ids)):
        yield np.ctypeslib.as_array(ctx.get_logits(), shape=(n_vocab,))
        if pos + 1 < len(ids):
            batch.set_batch(batch=[ids[pos]], n_past=pos, logits_all=True)
            ctx.decode(batch)


class WithTarget:
    """A GGUF draft whose sampled rows without the target's logprobs of the draw get them
    from the target's own pass; the draft then scores them as a draft that samples."""

    def __init__(self, draft: LlamaDraft, target: LlamaDraft) -> None:
        self.draft, self.target = draft, target
        self.name = draft.name

    @property
    def identity(self) -> str:
        return self.draft.identity

    @property
    def target_identity(self) -> str:
        """Kept in the results' identity: rows scored with the target's pass never mix with
        rows scored without it."""
        return self.target.identity

    @property
    def recipe(self) -> TargetRecipe:
        return TargetRecipe(self.draft.recipe, self.target.recipe)

    def check(self, tok: Any) -> None:
        self.draft.check(tok)
        self.target.check(tok)

    def fits(self, row: TokenRow) -> bool:
        return self.draft.fits(row) and self.target.fits(row)

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        self.draft.run(self._filled(rows, sink), sink)

    def _filled(self, rows: Iterable[TokenRow], sink: Sink) -> Iterator[TokenRow]:
        for row in rows:
            if not needs_target(row):
                yield row
            elif (why := why_not(row)) is not None:
                sink(row, InputError(f"{row.label}: {why}", kind=SKIPPED))
            else:
                filled = self._fill(row)
                if isinstance(filled, InputError):
                    sink(row, filled)
                else:
                    yield filled

    def _fill(self, row: TokenRow) -> TokenRow | InputError:
        logprobs = target_logprobs(self.target.llm, row.ids, row.start, row.drawn)
        if row.retokenized and len(logprobs) > 1 and logprobs[-1] == -math.inf:
            # the render closes the turn with the template's end-of-turn token, which an
            # answer cut at max_tokens never drew (its top-k/top-p left it out)
            row, logprobs = replace(row, ids=row.ids[:-1]), logprobs[:-1]
        if -math.inf in logprobs:
            at = logprobs.index(-math.inf)
            return InputError(
                f"{row.label}: answer token {at} is outside the run's top-k/top-p in the "
                "target's pass, so it is not the token drawn"
                + (
                    " (re-tokenised: generate with --return-token-ids)"
                    if row.retokenized
                    else " (is --target-model the model the run was generated with?)"
                ),
                kind=SKIPPED,
            )
        drawn = replace(row.drawn, logprobs="processed")  # now those of the draw
        return replace(row, logprobs=logprobs, drawn=drawn, target_probs=TEACHER_FORCED)

    def close(self) -> None:
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
    """The GGUF target named by --target-model for the GGUF drafts among `drafts`, closed on
    exit; None when none is named, or when the flag names the target of an EAGLE-3 or DFlash
    draft (its hidden states: hidden_draft.py) and no GGUF draft is scored."""
    if spec is None or (_reads_hidden_states(drafts) and not _samples_gguf(drafts)):
        yield None
        return
    if not _samples_gguf(drafts):
        raise ConfigError(
            f"{FLAG} serves a GGUF --draft (a draft that samples) or an EAGLE-3 or DFlash "
            "draft; the n-gram and a served draft propose one token, scored without the "
            "target's probabilities",
            hint=f"pass --draft PATH.gguf, or leave out {FLAG}",
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
    """Every GGUF draft paired with the target; the others (n-gram, a served draft, a draft
    that reads hidden states) need no target probabilities."""
    if target is None:
        return drafts
    return [WithTarget(d, target) if isinstance(d, LlamaDraft) else d for d in drafts]


def _samples_gguf(drafts: list[Any]) -> bool:
    return any(isinstance(d, LlamaDraft) for d in drafts)


def _reads_hidden_states(drafts: list[Any]) -> bool:
    return any(isinstance(d, HiddenStateDraft) for d in drafts)
