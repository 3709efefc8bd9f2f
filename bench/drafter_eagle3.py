"""An EAGLE-3 head, the drafter users train, trained on a lever's rows of regen's export with
speculators' own pieces, small and on the CPU (issue 57, item 4).

The data path is speculators': the lever's rows are lines of `regen export --format
speculators` (input_ids + loss_mask), `speculators prepare-data` turns them into its Arrow
dataset, and its `ArrowDataset` reads each row's target hidden states from a file
(`hidden_states/hs_<i>.safetensors`, its file backend), packed into batches by its
`MultipackDistributedBatchSamplerV2`, collated by its `CollateFn` and shifted by EAGLE-3's
`shift_batch`. The head is built by its `build_draft_model` from the flags `speculators train`
takes, with regen's draft vocabulary (`export --draft-vocab-size`: d2t/t2d), and its loss is
its own forward's.

What is not speculators': the hidden-state files come from the target loaded with
transformers (regen's `hidden_at`, the same states `regen score` feeds the head), where
speculators asks a vLLM server with its hidden-states connector; and the loop. `speculators
train` (0.9.0) stops on the CPU before its first step: `Trainer.setup_model` moves the model
to `get_local_rank()` (0, an accelerator index), and torch answers "RuntimeError: Cannot
access accelerator device when none is available" (trainer.py:348; its step timer also
synchronises an accelerator). The loop here is the smallest that keeps the rest: AdamW,
gradient clipping at 1.0 and a warm-up-then-cosine rate, as its Trainer does, stopping at
the budget of supervised tokens that every drafter of the comparison gets.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import xxhash

from drafter_train import Budget, Trained, cosine

LAYERS = (2, 15, 27)  # speculators' default for a 30-block target: 2, n // 2, n - 3
SEQ_LEN = 1024  # one packed batch: several rows, as speculators packs them
LR = 1e-3
SPECULATORS = Path(sys.executable).parent / "speculators"  # its CLI, beside this Python


def prepare(rows_file: Path, target: Path, out: Path, log: Path) -> Path:
    """`speculators prepare-data` on the lever's rows, as a user runs it (no render
    endpoint: the rows carry input_ids and loss_mask)."""
    if (out / "dataset_info.json").is_file():
        return out
    args = [str(SPECULATORS), "prepare-data", "--model", str(target), "--data", str(rows_file)]
    args += ["--output", str(out), "--seq-length", "4096", "--num-preprocessing-workers", "1"]
    with log.open("a") as sink:
        sink.write(f"\n$ {' '.join(args)}\n")
        sink.flush()
        done = subprocess.run(args, stdout=sink, stderr=subprocess.STDOUT, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"speculators prepare-data exited {done.returncode}: see {log}")
    return out


def hidden_states(prep: Path, target: Any, cache: Path) -> int:
    """Each row's target hidden states at LAYERS and the last block (what the head reads and
    what its loss is taken against), in the file backend's layout; a row another lever
    already needed is linked from the cache, not recomputed. The rows computed now."""
    import torch
    from datasets import load_from_disk
    from safetensors.torch import save_file

    layers = [*LAYERS, target.blocks]  # target: score's TargetPass, the pass score reads too
    if not set(layers) <= set(target.layers):
        target.want(layers)
    folder = prep / "hidden_states"
    folder.mkdir(exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    computed = 0
    for i, row in enumerate(load_from_disk(str(prep)).with_format("torch")):
        ids = row["input_ids"]
        kept = cache / f"{xxhash.xxh3_64_hexdigest(ids.numpy().tobytes())}.safetensors"
        if not kept.is_file():
            captured = target.capture([ids.tolist()])[0]
            states = torch.stack([captured[layer] for layer in layers], dim=1)  # [n, layers, h]
            partial = kept.with_suffix(".partial")
            save_file({"hidden_states": states.contiguous(), "token_ids": ids}, str(partial))
            partial.replace(kept)
            computed += 1
        link = folder / f"hs_{i}.safetensors"
        link.unlink(missing_ok=True)
        os.link(kept, link)
    return computed


def train(prep: Path, target: Path, vocab: Path, out: Path, budget: Budget) -> Trained:
    """The head, from speculators' own init at the budget's seed, trained until the budget of
    supervised tokens is spent; saved in speculators' format for `regen score --draft`."""
    import torch

    started = time.monotonic()
    torch.set_num_threads(budget.threads)
    model, kwargs = _head(prep, target, vocab, budget.seed)
    loader, sampler = _loader(prep, model, budget.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=LR, weight_decay=0.0)
    per_batch = _supervised(prep) / max(1, len(loader))
    planned = max(1, math.ceil(budget.tokens / max(1.0, per_batch)))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda s: cosine(s, planned))
    trained = Trained(out, 0, 0)
    model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers' renamed kwargs
        for batch in _batches(loader, sampler):
            inputs = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
            _, loss, _ = model(**inputs, **kwargs)
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimiser.step()
            schedule.step()
            trained.steps += 1
            trained.tokens += int(inputs["loss_mask"].sum())
            trained.losses.append(loss.item())
            if trained.tokens >= budget.tokens:
                break
    if trained.tokens < budget.tokens:
        raise SystemExit(f"{out.name}: the budget was not spent in 1000 passes over {prep}")
    model.eval().save_pretrained(str(out))
    trained.seconds = time.monotonic() - started
    return trained


def _batches(loader: Any, sampler: Any) -> Iterator[dict]:
    """Packed batches, pass after pass (a new order each: the sampler's epoch), bounded."""
    for epoch in range(1000):  # far above any budget here
        sampler.set_epoch(epoch)
        yield from loader


def _head(prep: Path, target: Path, vocab: Path, seed: int) -> tuple[Any, dict]:
    """speculators' EAGLE-3 head, built as `speculators train` builds it from these flags."""
    import argparse

    from loguru import logger
    from speculators.model import SpeculatorModel
    from speculators.train.cli import build_draft_model, parse_vocab_mappings, set_seed
    from speculators.train.config import TrainConfig

    size = next(vocab.glob("d2t-*.npy")).stem.split("-")[1]
    flags = ["--speculator-type", "eagle3", "--verifier-name-or-path", str(target)]
    flags += ["--data-path", str(prep), "--target-layer-ids", *map(str, LAYERS)]
    flags += ["--d2t-path", str(vocab / f"d2t-{size}.npy")]
    flags += ["--t2d-path", str(vocab / f"t2d-{size}.npy"), "--draft-vocab-size", size]
    flags += ["--hidden-states-dtype", "float32", "--total-seq-len", str(SEQ_LEN)]
    flags += ["--draft-attn-impl", "sdpa", "--loss-implementation", "eager"]
    flags += ["--seed", str(seed), "--lr", str(LR)]
    args = argparse.Namespace(**TrainConfig.resolve(flags).flatten())
    set_seed(args.seed)
    d2t, t2d, draft_vocab = parse_vocab_mappings(args)
    model_class = SpeculatorModel.registry["eagle3"]
    logger.disable("speculators")  # where it loads the target's weights from, once per head
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # no mask token: it takes the pad token
        model = build_draft_model(args, model_class, t2d, d2t, draft_vocab)
    kwargs, _ = model_class.get_trainer_kwargs(**vars(args))
    return model, kwargs


def _loader(prep: Path, model: Any, seed: int) -> tuple[Any, Any]:
    import torch
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import ArrowDataset, CollateFn
    from speculators.train.distributed_batch_sampler import MultipackDistributedBatchSamplerV2
    from torch.utils.data import DataLoader

    data = ArrowDataset(
        max_len=SEQ_LEN, datapath=str(prep), on_missing="raise", hidden_states_dtype=torch.float32
    )
    sampler = MultipackDistributedBatchSamplerV2(
        batch_max_length=SEQ_LEN, lengths=data.approx_lengths, num_replicas=1, rank=0, seed=seed
    )
    collate = CollateFn(
        SEQ_LEN,
        model.config.transformer_layer_config.hidden_size,
        num_target_layers=len(LAYERS),
        dtype=torch.float32,
        preprocess=shift_batch,
    )
    return DataLoader(data, batch_sampler=sampler, num_workers=0, collate_fn=collate), sampler


def _supervised(prep: Path) -> int:
    from datasets import load_from_disk

    masks: Sequence = load_from_disk(str(prep))["loss_mask"]
    return sum(sum(m[1:]) for m in masks)
