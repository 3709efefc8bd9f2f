"""A GGUF draft model on the embedded llama.cpp (llama-cpp-python, CPU, no server).

One forward pass over prompt + answer with logits for every position (`logits_all`); the
argmax of the row before each answer token is the draft's greedy guess for it. The KV cache
is cleared between rows (`reset`), so no row sees another.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.score.tokens import Sink, TokenRow
from regen.score.vocab import check_vocab

DEFAULT_CONTEXT = 4096


class LlamaDraft:
    def __init__(self, path: Path, *, n_ctx: int = DEFAULT_CONTEXT, threads: int = 2) -> None:
        if not path.is_file():
            raise ConfigError(f"--draft {path}: no such GGUF file", hint="check the path")
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
        try:
            self.llm = Llama(model_path=str(path), logits_all=True, n_ctx=n_ctx,
                             n_threads=threads, verbose=False)  # fmt: skip
        except ValueError as exc:  # llama-cpp-python's answer to a file it cannot load
            raise ConfigError(f"--draft {path}: llama.cpp cannot load it: {exc}") from exc

    @property
    def identity(self) -> str:
        stat = self.path.stat()
        return f"gguf:{self.path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"

    def vocabulary(self) -> list[str]:
        model = self.llm._model  # the token texts are only on the low-level model object
        return [model.token_get_text(i) for i in range(self.llm.n_vocab())]

    def check(self, tok: Any) -> None:
        check_vocab(self.vocabulary(), tok, f"--draft {self.path}")

    def fits(self, row: TokenRow) -> bool:
        return len(row.ids) <= self.n_ctx

    def matches(self, ids: Sequence[int], start: int) -> str:
        import numpy as np

        self.llm.reset()
        self.llm.eval(list(ids[:-1]))  # the last token predicts past the answer: not needed
        guesses = np.argmax(self.llm.scores[start - 1 : len(ids) - 1], axis=1)
        truth = np.asarray(ids[start:])
        return "".join("1" if hit else "0" for hit in guesses == truth)

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        for row in rows:
            sink(row, self.matches(row.ids, row.start))

    def close(self) -> None:
        self.llm.close()
