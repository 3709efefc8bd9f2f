"""Train a small layer-skip draft of the target on a `regen export --format tokenized` folder.

The draft is the target's embeddings, its first few blocks, its final norm and its (tied)
head, as draft models made by truncating the target are; it is a Hugging Face causal LM,
so `regen score --draft DIR` reads it as a user's HF draft. Training reads the rows of a
`regen export` (drafter_rows.py) and takes a next-token loss only where the export's loss
mask is 1: the tokens the target wrote. The blocks and the norm learn; the
embeddings and head stay the target's (tied, and the head is most of the parameters).

Two drafters trained here differ only in the rows they read: the same init, seed, order of
batches drawn by the seed, learning-rate schedule and budget of supervised tokens.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Budget:
    """What every drafter of one comparison gets, whatever its data."""

    tokens: int  # supervised tokens to train on (rows are reread when the data is smaller)
    blocks: int = 2  # the target's first blocks kept in the draft
    batch_rows: int = 8
    lr: float = 2e-3
    seed: int = 0
    # one thread: on two cores shared with other work, a second thread spins against the
    # neighbours (a forward of the target ran 6x slower with 2 threads at load 9 than with 1)
    threads: int = 1


@dataclass
class Trained:
    folder: Path
    steps: int
    tokens: int
    losses: list[float] = field(default_factory=list)  # mean loss per step, in order
    seconds: float = 0.0

    def first_and_last(self, span: int = 5) -> tuple[float, float]:
        """Mean loss of the first and the last `span` steps (one step is noisy)."""
        head, tail = self.losses[:span], self.losses[-span:]
        return sum(head) / len(head), sum(tail) / len(tail)


def layer_skip_draft(target: Path, blocks: int) -> Any:
    """The target's first `blocks` blocks with its norm and tied head, in float32."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging

    logging.set_verbosity_error()  # the load report lists every block left out: expected here
    logging.disable_progress_bar()

    config = AutoConfig.from_pretrained(str(target))
    config.num_hidden_layers = blocks
    model = AutoModelForCausalLM.from_pretrained(str(target), config=config, dtype=torch.float32)
    for name, param in model.named_parameters():
        param.requires_grad = ".layers." in name or name.endswith("model.norm.weight")
    return model


def save_init(target: Path, out: Path, blocks: int) -> Path:
    """The untrained draft (the same init every trained drafter starts from), for `score`."""
    from transformers import AutoTokenizer

    layer_skip_draft(target, blocks).save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(target)).save_pretrained(str(out))
    return out


def batches(rows: Sequence[tuple[list[int], list[int]]], budget: Budget) -> Iterator[list[int]]:
    """Indices of rows, batch by batch, in an order drawn by the seed, rereading the rows in a
    new order once they are used up, until the budget of supervised tokens is spent."""
    rng = random.Random(budget.seed)
    spent = 0
    for _ in range(10_000):  # passes over the data: bounded, far above any budget here
        order = list(range(len(rows)))
        rng.shuffle(order)
        for start in range(0, len(order), budget.batch_rows):
            chunk = order[start : start + budget.batch_rows]
            yield chunk
            spent += sum(sum(rows[i][1][1:]) for i in chunk)
            if spent >= budget.tokens:
                return


def step_loss(model: Any, rows: Sequence[tuple[list[int], list[int]]]) -> tuple[Any, int]:
    """Mean next-token loss over the masked tokens of a padded batch. The head runs only on
    the positions that predict a masked token: it is most of a small draft's cost."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for r, (row_ids, row_mask) in enumerate(rows):
        ids[r, : len(row_ids)] = torch.tensor(row_ids)
        attention[r, : len(row_ids)] = 1
        mask[r, : len(row_mask)] = torch.tensor(row_mask, dtype=torch.bool)
    hidden = model.model(input_ids=ids, attention_mask=attention).last_hidden_state
    predicts = mask[:, 1:]  # position t predicts token t + 1
    logits = model.lm_head(hidden[:, :-1][predicts])
    targets = ids[:, 1:][predicts]
    return torch.nn.functional.cross_entropy(logits, targets), int(predicts.sum())


def train(
    rows: Sequence[tuple[list[int], list[int]]], target: Path, out: Path, budget: Budget
) -> Trained:
    """One drafter, trained from the target's init on `rows` until the budget is spent."""
    import torch
    from transformers import AutoTokenizer

    if not rows:
        raise ValueError(f"{out.name}: no rows with supervised tokens to train on")
    started = time.monotonic()
    torch.manual_seed(budget.seed)
    torch.set_num_threads(budget.threads)
    model = layer_skip_draft(target, budget.blocks).train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=budget.lr, weight_decay=0.0)
    planned = max(1, math.ceil(budget.tokens / max(1, _mean_supervised(rows) * budget.batch_rows)))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda s: cosine(s, planned))
    trained = Trained(out, 0, 0)
    for chunk in batches(rows, budget):
        loss, tokens = step_loss(model, [rows[i] for i in chunk])
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimiser.step()
        schedule.step()
        trained.steps += 1
        trained.tokens += tokens
        trained.losses.append(loss.item())
    model.eval().save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(target)).save_pretrained(str(out))
    trained.seconds = time.monotonic() - started
    return trained


def _mean_supervised(rows: Sequence[tuple[list[int], list[int]]]) -> float:
    return sum(sum(mask[1:]) for _, mask in rows) / len(rows)


def cosine(step: int, planned: int) -> float:
    """A short warm-up, then a cosine to a tenth of the rate at the planned last step."""
    warm = max(1, planned // 20)
    if step < warm:
        return (step + 1) / warm
    done = min(1.0, (step - warm) / max(1, planned - warm))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done))
