"""A GGUF draft model on the embedded llama.cpp (llama-cpp-python, CPU, no server).

One forward pass over prompt + answer, batch by batch, with logits for every position; the
argmax of the row before each answer token is the draft's greedy guess for it. Only one
batch of logits is held at a time (llama-cpp-python's `logits_all` would keep n_ctx x vocab
floats: 800 MB for a 4K-token row of a 49K vocabulary). The KV cache is cleared between rows,
so no row sees another.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regen.errors import ConfigError, InputError
from regen.score.outcome import Accept, encode_accept
from regen.score.sampled import DrawnAt, acceptances, drawn_logprobs
from regen.score.tokens import Sink, TokenRow
from regen.score.vocab import check_vocab

DEFAULT_CONTEXT = 4096


@dataclass(frozen=True)
class GGUFRecipe:
    """What a worker needs to open the same draft (score/spread.py)."""

    path: str
    n_ctx: int
    threads: int

    def open(self) -> LlamaDraft:
        return LlamaDraft(Path(self.path), n_ctx=self.n_ctx, threads=self.threads)

    @property
    def fork_safe(self) -> bool:
        """False where llama.cpp runs its threads with OpenMP (a pip build's default): once
        this process has run a model, GNU OpenMP's thread team is gone in a forked copy, and
        the copy's first decode waits for it forever. Workers then start from a fork server."""
        return not uses_openmp()


def uses_openmp() -> bool:
    from llama_cpp import llama_print_system_info

    return b"OPENMP = 1" in llama_print_system_info()


class LlamaDraft:
    samples = True  # on a run with logprobs it samples from its q: it reads the target's p

    def __init__(
        self, path: Path, *, n_ctx: int = DEFAULT_CONTEXT, threads: int = 2, flag: str = "--draft"
    ) -> None:
        """`flag`: the option that named the file, for the messages (--target-model too)."""
        if not path.is_file():
            raise ConfigError(f"{flag} {path}: no such GGUF file", hint="check the path")
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ConfigError(
                "a GGUF draft needs llama-cpp-python",
                hint="install it with: pip install 'regen[embedded]'",
            ) from exc
        self.path = path
        self.name = path.stem
        self.n_ctx = n_ctx
        self.recipe = GGUFRecipe(str(path), n_ctx, threads)
        try:
            self.llm = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=threads,
                n_threads_batch=threads,  # a batch, too: llama-cpp-python would take every core
                verbose=False,
            )
        except ValueError as exc:  # llama-cpp-python's answer to a file it cannot load
            raise ConfigError(f"{flag} {path}: llama.cpp cannot load it: {exc}") from exc
        self.flag = flag

    @property
    def identity(self) -> str:
        stat = self.path.stat()
        return f"gguf:{self.path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"

    def vocabulary(self) -> list[str]:
        model = self.llm._model  # the token texts are only on the low-level model object
        return [model.token_get_text(i) for i in range(self.llm.n_vocab())]

    def check(self, tok: Any) -> None:
        check_vocab(self.vocabulary(), tok, f"{self.flag} {self.path}")

    def fits(self, row: TokenRow) -> bool:
        return len(row.ids) <= self.n_ctx

    def matches(self, ids: Sequence[int], start: int) -> str:
        import numpy as np

        guesses: list[int] = []
        # the last token predicts past the answer: not needed
        for at, logits in forward(self.llm, ids[:-1], start - 1):
            guesses.extend(np.argmax(logits[max(start - 1 - at, 0) :], axis=1).tolist())
        return "".join("1" if g == t else "0" for g, t in zip(guesses, ids[start:], strict=True))

    def accepts(
        self, ids: Sequence[int], start: int, logprobs: list[float], drawn: DrawnAt
    ) -> Accept:
        """min(1, q(x)/p(x)) per answer token, q the draft's distribution at the answer's
        sampling (sampled.py), p the target's from the run's logprobs."""
        logq: list[float] = []
        for at, logits in forward(self.llm, ids[:-1], start - 1):
            first = max(start - 1 - at, 0)
            tokens = ids[at + first + 1 : at + len(logits) + 1]
            logq.extend(drawn_logprobs(logits[first:], tokens, drawn).tolist())
        return encode_accept(acceptances(logq, logprobs))

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        for row in rows:
            if row.drawn.greedy or row.logprobs is None:  # its argmax: exact at temperature 0
                sink(row, self.matches(row.ids, row.start))
            elif (why := row.drawn.logprobs_fit()) is not None:
                sink(row, InputError(f"{row.label}: {why}", kind="logprobs_not_drawn"))
            else:
                sink(row, self.accepts(row.ids, row.start, row.logprobs, row.drawn))

    def close(self) -> None:
        self.llm.close()


def forward(llm: Any, ids: Sequence[int], first: int) -> Iterator[tuple[int, Any]]:
    """Evaluate `ids` on an empty KV cache, `n_batch` tokens at a time, with logits for every
    position; yield (position of the batch's first token, its logits as a [tokens, vocab]
    array view, valid until the next batch) for each batch that reaches position `first`."""
    import numpy as np

    ctx, batch, n_vocab = llm._ctx, llm._batch, llm.n_vocab()  # llama-cpp-python's own
    ctx.kv_cache_clear()
    llm.n_tokens = 0
    for at in range(0, len(ids), llm.n_batch):
        chunk = list(ids[at : at + llm.n_batch])
        batch.set_batch(batch=chunk, n_past=at, logits_all=True)
        ctx.decode(batch)
        if at + len(chunk) > first:
            yield at, np.ctypeslib.as_array(ctx.get_logits(), shape=(len(chunk), n_vocab))
