"""The target's logits before each answer token, decoded as the server decoded them, for
several rows at once (`score --target-model`, target_probs.py).

llama.cpp's CPU kernels give a batch over one sequence slightly different logits than the
same tokens one at a time (up to 0.15 nats a token on SmolLM2), so the answer is decoded one
token a step, as the server decoded it (equal to its --logprobs to 5e-6). A step is cheap in
arithmetic and dear in overhead (waking the threads, reading the weights): `RowsPass`
decodes the next token of up to `ROWS` rows in one step, each row its own sequence with a
KV cache of its own, and the logits are the same, to the bit, as the row's alone (tested
against the server's --logprobs and against each row decoded alone). One cache shared by
the rows would not do: a row's cells would sit at other offsets than alone, and the sums
over them round differently. The prompts are decoded `n_batch` tokens at a time, each in
its own call, as the server did.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

ROWS = 16  # rows a step decodes together
KV_BYTES = 512 << 20  # their KV caches together, at most (one row always fits)
PAD = 256  # llama.cpp reads a sequence's cache in whole blocks of this many cells


@dataclass(frozen=True)
class Job:
    ids: Sequence[int]
    start: int  # the answer is ids[start:]

    @property
    def steps(self) -> int:
        return len(self.ids) - self.start  # logits before each answer token


def cells_for(jobs: Sequence[Job]) -> int:
    """Each row's cache: the longest row's tokens in whole blocks (a cache at least this
    long reads the same cells as the server's, whatever its size)."""
    longest = max(len(j.ids) for j in jobs)
    return -(-longest // PAD) * PAD


class RowsPass:
    """Contexts on the target's model for up to `rows` sequences, a cache each."""

    def __init__(self, llm: Any, rows: int | None = None) -> None:
        from llama_cpp import _internals

        self.llm, self.rows, self.n_vocab = llm, rows or ROWS, llm.n_vocab()
        self.cell_bytes = _cell_bytes(llm)
        self.ctx: Any = None
        self.shape = (0, 0)  # (sequences, cells each) of self.ctx
        self.batch = _internals.LlamaBatch(
            n_tokens=max(llm.n_batch, self.rows), embd=0, n_seq_max=1, verbose=False
        )

    def fits(self, jobs: list[Job], job: Job) -> bool:
        """Whether `job` joins `jobs` in one pass: a free sequence, and the caches within
        `KV_BYTES`."""
        group = [*jobs, job]
        if not jobs:
            return True
        return len(group) <= self.rows and (
            len(group) * cells_for(group) * self.cell_bytes <= KV_BYTES
        )

    def _context(self, jobs: list[Job]) -> Any:
        """A context with a cache of `cells_for(jobs)` for each job; the one made for the
        last pass when it is as big."""
        seqs, cells = len(jobs), cells_for(jobs)
        if self.shape[0] >= seqs and self.shape[1] >= cells:
            return self.ctx
        from llama_cpp import _internals

        if self.ctx is not None:
            self.ctx.close()
        seqs, cells = max(seqs, self.shape[0]), max(cells, self.shape[1])
        if seqs * cells * self.cell_bytes > KV_BYTES:  # keep the memory: just this pass's
            seqs, cells = len(jobs), cells_for(jobs)
        params = type(self.llm.context_params).from_buffer_copy(self.llm.context_params)
        params.n_ctx, params.n_seq_max, params.kv_unified = seqs * cells, seqs, False
        self.ctx = _internals.LlamaContext(model=self.llm._model, params=params, verbose=False)
        self.shape = (seqs, cells)
        return self.ctx

    def logits(self, jobs: list[Job]) -> Iterator[tuple[int, Any]]:
        """(job index, the logits before its next answer token), in answer order per job;
        an array view, valid until the next item."""
        ctx = self._context(jobs)
        ctx.kv_cache_clear()
        n_batch = self.llm.n_batch
        for k, job in enumerate(jobs):  # each prompt alone, n_batch tokens a call
            for at in range(0, job.start, n_batch):
                chunk = range(at, min(at + n_batch, job.start))
                last = self._put([(k, p, job.ids[p]) for p in chunk], every=False)
            yield k, self._row(last)
        for step in range(max(j.steps for j in jobs) - 1):  # one token of every row a step
            going = [
                (k, j.start + step, j.ids[j.start + step])
                for k, j in enumerate(jobs)
                if step < j.steps - 1
            ]
            self._put(going, every=True)
            for i, (k, _, _) in enumerate(going):
                yield k, self._row(i)

    def _put(self, tokens: list[tuple[int, int, int]], every: bool) -> int:
        """Decode (sequence, position, token) triples, with logits for `every` one or, as
        for a prompt's chunk, the last only; the last one's index."""
        b = self.batch.batch
        b.n_tokens = len(tokens)
        for i, (seq, pos, token) in enumerate(tokens):
            b.token[i], b.pos[i], b.n_seq_id[i] = token, pos, 1
            b.seq_id[i][0] = seq
            b.logits[i] = every or i == len(tokens) - 1
        self.ctx.decode(self.batch)
        return len(tokens) - 1

    def _row(self, i: int) -> Any:
        import numpy as np

        return np.ctypeslib.as_array(self.ctx.get_logits_ith(i), shape=(self.n_vocab,))

    def close(self) -> None:
        self.batch.close()
        if self.ctx is not None:
            self.ctx.close()


def _cell_bytes(llm: Any) -> int:
    """One token's keys and values over every layer, in f16."""
    import llama_cpp

    model = llm._model.model
    heads = max(llama_cpp.llama_model_n_head(model), 1)
    kv = llama_cpp.llama_model_n_embd(model) * llama_cpp.llama_model_n_head_kv(model) // heads
    return max(2 * 2 * llama_cpp.llama_model_n_layer(model) * kv, 1)
