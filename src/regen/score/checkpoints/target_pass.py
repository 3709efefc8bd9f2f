"""The target's forward passes for the drafters that read its hidden states: loaded once per
target folder, shared by every checkpoint that reads it, and run over batches of rows.

Every checkpoint names the layers it reads (`want`); one pass captures their union, so two
drafters side by side (yours and the reference) cost one target pass, not two.

A layer is captured where the block sees it, by a hook, not from `output_hidden_states`
(which would hold every layer of every token: 65 layers x 5,120 values a token for a 27B
target): input index i < L is the input of block i (transformers' hidden_states[i]); i = L is
the last block's output before the final norm (hf_target.py has the two conventions).

Batches: rows sorted by length within a window, packed until the padded batch would pass
`max_batch_tokens`, padded on the right with an attention mask (a token attends only to
earlier ones, so padding after a row never reaches it). The counters say what the pass cost.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regen.score.checkpoints.hf_target import block_count, load_causal_lm
from regen.score.checkpoints.placement import Placement

WINDOW = 64  # rows read ahead and sorted by length: a batch pads little
FINAL = -1  # in the captured states: the final normed state, what the target's head reads


@dataclass
class PassCost:
    """What the target's passes cost: forwards (batches), rows and tokens through it."""

    forwards: int = 0
    rows: int = 0
    tokens: int = 0  # real tokens (padding not counted)
    padded: int = 0  # tokens including padding
    seconds: float = 0.0

    def line(self, placement: Placement, readers: int) -> str:
        rate = 1000 * self.seconds / max(self.tokens, 1)
        return (
            f"target pass ({placement.label}): {self.rows} rows, {self.tokens:,} tokens in "
            f"{self.forwards} forwards, {self.seconds:.1f} s ({rate:.2f} s per 1,000 tokens), "
            f"read by {readers} drafter{'s' if readers != 1 else ''}"
        )


class TargetPass:
    def __init__(self, folder: Path, placement: Placement, threads: int, what: str) -> None:
        self.folder, self.placement = folder, placement
        self.model = load_causal_lm(folder, threads, what, placement)
        self.blocks = block_count(self.model)
        self.layers: list[int] = []
        self.readers = 0
        self.cost = PassCost()

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def device(self) -> Any:
        """Where the inputs go (the embedding's device, the first GPU of a split)."""
        return self.model.get_input_embeddings().weight.device

    def want(self, layers: Iterable[int]) -> None:
        """A checkpoint reads these layers (input indices): the pass captures them too."""
        self.layers = sorted(set(self.layers) | set(layers))
        self.readers += 1

    def batches(self, rows: Iterable[Any], size: Any = len) -> Iterator[list[Any]]:
        """Rows (anything `size` gives a token count of) in batches under the bound, sorted
        by length within a window of WINDOW rows; a row over the bound goes alone."""
        window: list[Any] = []
        for row in rows:
            window.append(row)
            if len(window) == WINDOW:
                yield from _packed(window, size, self.placement.max_batch_tokens)
                window = []
        if window:
            yield from _packed(window, size, self.placement.max_batch_tokens)

    def capture(self, batch: Sequence[Sequence[int]]) -> list[dict[int, Any]]:
        """One forward over token lists: per list, {layer: [len(ids), hidden]} at every
        layer wanted and at FINAL, on the device the pass ran on."""
        import torch

        longest = max(len(ids) for ids in batch)
        ids = torch.zeros((len(batch), longest), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, row in enumerate(batch):
            ids[i, : len(row)] = torch.tensor(list(row))
            mask[i, : len(row)] = 1
        seen: dict[int, Any] = {}
        hooks = self._hooks(seen)
        began = time.perf_counter()
        try:
            with torch.no_grad():
                seen[FINAL] = self.model.model(
                    input_ids=ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    use_cache=False,
                ).last_hidden_state
            if self.device.type == "cuda":
                torch.cuda.synchronize()  # the time is the GPU's, not the launch's
        finally:
            for hook in hooks:
                hook.remove()
        self._count(batch, longest, time.perf_counter() - began)
        kept = [*self.layers, FINAL]
        return [{i: seen[i][r, : len(row)] for i in kept} for r, row in enumerate(batch)]

    def _hooks(self, seen: dict[int, Any]) -> list[Any]:
        blocks = self.model.model.layers
        hooks = []
        for i in self.layers:
            if i < self.blocks:  # the input of block i, as the block receives it

                def before(_m: Any, args: tuple, kwargs: dict, i: int = i) -> None:
                    seen[i] = args[0] if args else kwargs["hidden_states"]

                hooks.append(blocks[i].register_forward_pre_hook(before, with_kwargs=True))
            else:  # the last block's own output, before the final norm

                def after(_m: Any, _a: Any, out: Any, i: int = i) -> None:
                    seen[i] = out[0] if isinstance(out, tuple) else out

                hooks.append(blocks[self.blocks - 1].register_forward_hook(after))
        return hooks

    def _count(self, batch: Sequence[Sequence[int]], longest: int, seconds: float) -> None:
        self.cost.forwards += 1
        self.cost.rows += len(batch)
        self.cost.tokens += sum(len(ids) for ids in batch)
        self.cost.padded += longest * len(batch)
        self.cost.seconds += seconds

    def close(self) -> None:
        self.model = None


def _packed(window: list[Any], size: Any, bound: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for row in sorted(window, key=size, reverse=True):
        if batch and size(batch[0]) * (len(batch) + 1) > bound:
            yield batch
            batch = []
        batch.append(row)
    if batch:
        yield batch


class Targets:
    """The target passes opened for one `score`: one per target folder, whatever number of
    checkpoints read it."""

    def __init__(self) -> None:
        self.opened: dict[Path, TargetPass] = {}

    def open(self, folder: Path, placement: Placement, threads: int, what: str) -> TargetPass:
        key = folder.resolve()
        if key not in self.opened:
            self.opened[key] = TargetPass(folder, placement.resolved(), threads, what)
        return self.opened[key]

    def close(self) -> None:
        for target in self.opened.values():
            target.close()
        self.opened.clear()
