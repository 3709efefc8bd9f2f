"""A Hugging Face causal-LM draft model (draft-model speculation as vLLM and SGLang serve it),
run with transformers at --device and --dtype (placement.py).

It sees only tokens, so accept.py's argument holds as for a GGUF draft: while its greedy
chain matches the answer, the chain's context is the true prefix, and one teacher-forced pass
over prompt + answer gives the exact greedy outcome at every k. Rows drawn at a temperature
with the target's logprobs get the sampled estimate (sampled.py), as a GGUF draft's do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from regen.errors import ConfigError, InputError
from regen.score.checkpoints.hf_target import folder_tokens, load_causal_lm
from regen.score.checkpoints.placement import ON_CPU, Placement
from regen.score.outcome import encode_accept
from regen.score.sampled import acceptances, drawn_logprobs
from regen.score.tokens import Sink, TokenRow
from regen.score.vocab import check_vocab


class HFDraft:
    samples = True  # on a run with logprobs it samples from its q: it reads the target's p

    def __init__(
        self, path: Path, config: dict[str, Any], *, threads: int = 2, placement: Placement = ON_CPU
    ) -> None:
        self.path = path
        self.name = path.name
        self.config = config
        self.what = f"--draft {path}"
        self.placement = placement
        self.model = load_causal_lm(path, threads, self.what, placement)
        self.n_ctx = int(config.get("max_position_embeddings") or 0) or None

    @property
    def identity(self) -> str:
        newest = max(f.stat().st_mtime_ns for f in self.path.iterdir() if f.is_file())
        dtype = self.placement.dtype  # float32 rows keep the identity they had
        precision = f":dtype={dtype}" if dtype != "float32" else ""
        return f"hf:{self.path.resolve()}:{newest}{precision}"

    def check(self, tok: Any) -> None:
        """By token text when the folder has a tokenizer; by size when it has none (a draft
        trained on the target's tokenizer often ships without one)."""
        ours = folder_tokens(self.path, self.what)
        if ours is not None:
            check_vocab(ours, tok, self.what)
            return
        size = int(self.config.get("vocab_size") or 0)
        if size < len(tok):
            raise ConfigError(
                f"{self.what} does not share the target's vocabulary: its embedding has "
                f"{size} rows, the target's tokenizer {len(tok)} tokens",
                hint="use a draft trained on the target's tokenizer (same family and "
                "vocabulary), or check that --tokenizer names the target model",
            )

    def fits(self, row: TokenRow) -> bool:
        return self.n_ctx is None or len(row.ids) <= self.n_ctx

    def logits(self, ids: Sequence[int], start: int) -> Any:
        """[answer tokens, vocab]: the draft's logits before each answer token."""
        import torch

        with torch.no_grad():
            device = self.model.get_input_embeddings().weight.device
            out = self.model(
                input_ids=torch.tensor([list(ids[:-1])], device=device),
                logits_to_keep=len(ids) - start,
            )
        return out.logits[0].float().cpu().numpy()

    def matches(self, ids: Sequence[int], start: int) -> str:
        guesses = self.logits(ids, start).argmax(axis=1).tolist()
        return "".join("1" if g == t else "0" for g, t in zip(guesses, ids[start:], strict=True))

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        for row in rows:
            if row.drawn.greedy or row.logprobs is None:  # its argmax: exact at temperature 0
                sink(row, self.matches(row.ids, row.start))
            elif (why := row.drawn.logprobs_fit()) is not None:
                sink(row, InputError(f"{row.label}: {why}", kind="logprobs_not_drawn"))
            else:
                logq = drawn_logprobs(
                    self.logits(row.ids, row.start), row.ids[row.start :], row.drawn
                )
                sink(row, encode_accept(acceptances(logq, row.logprobs)))

    def close(self) -> None:
        self.model = None
