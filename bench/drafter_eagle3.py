"""An EAGLE-3 head, the drafter users train, trained on a lever's rows of regen's export by
speculators' own trainer, small and on the CPU (issue 57, item 4).

The data path is speculators': the lever's rows are lines of `regen export --format
speculators` (input_ids + loss_mask), `speculators prepare-data` turns them into its Arrow
dataset, and its `ArrowDataset` reads each row's target hidden states from a file
(`hidden_states/hs_<i>.safetensors`, its file backend), packed into batches by its
`MultipackDistributedBatchSamplerV2`, collated by its `CollateFn` and shifted by EAGLE-3's
`shift_batch`, in the loader its CLI builds. The head is built by its `build_draft_model` from
the flags `speculators train` takes (resolved by its `TrainConfig` and saved as its run.yaml),
with regen's draft vocabulary (`export --draft-vocab-size`: d2t/t2d), and trained by its
`Trainer`: its `run_training` loop, optimiser, schedule, loss and checkpointer. The
checkpointer writes one checkpoint an epoch (in bfloat16, as it saves them); the last one's
head is moved up into the draft folder, where `regen score --draft` reads it, and the rest,
optimiser states included, removed.

The budget: every drafter of the comparison trains on the same number of supervised tokens.
`plan` walks its sampler's packed batches, epoch after epoch, to the first batch that reaches
the budget, and its trainer is given that many epochs and that step as `--max-steps` (its
schedule decays over them); a forward hook counts what each step trained on, and a count
that differs from the plan stops the run.

What is not as `speculators train` (0.9.0) runs it:
- The hidden-state files come from the target loaded with transformers (regen's
  `hidden_at`, the same states `regen score` feeds the head), where speculators asks a vLLM
  server with its hidden-states connector.
- Its Trainer is built here as its CLI's `main` builds it, not by the CLI, because the CLI
  always holds a validation share out (`--train-data-ratio` lies strictly between 0 and 1,
  and the held-out rows are the file's last, where the cut-answer arm keeps its cut rows);
  here its loader reads every row and there is no validation pass.
- Two shims, only while it trains (`_on_the_cpu`), without which it stops on the CPU with
  "RuntimeError: Cannot access accelerator device when none is available":
  `get_local_rank`, as its trainer sees it, gives the CPU, because the trainer moves the head
  and each batch to that index (0, an accelerator; trainer.py:348); and
  `torch.accelerator.synchronize` does nothing, because its step timer waits on the
  accelerator at every logged step, and the CPU's work is done when each call returns.
- `--optimizer adamw`, its own flag, where its default is Muon: torch's Muon orthogonalises
  each update in bfloat16, and a bfloat16 matrix product on this CPU is ~22x slower than in
  float32, so its step took 35-38 s here against 5 s for the forward and backward.
- Its autocast asks for "cuda" and turns itself off on the CPU (the warning is silenced): the
  head trains in float32, as its hidden states are.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import xxhash

from drafter_train import Budget, Trained

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
    """The head, from speculators' own init at the budget's seed, trained by speculators'
    Trainer until the budget of supervised tokens is spent; its checkpointer's last checkpoint
    becomes the draft folder's head (speculators' format, for `regen score --draft`)."""
    import torch
    from speculators.train.trainer import Trainer

    started = time.monotonic()
    torch.set_num_threads(budget.threads)
    epochs, planned = plan(prep, budget)
    steps = len(planned)
    saves = out / "checkpoints"
    if saves.exists():  # a run stopped before its trained.json: start again, as the others do
        shutil.rmtree(saves)
    args, calls = _flags(prep, target, vocab, budget.seed, epochs, steps, saves)
    model = _head(args)
    trained, ran = Trained(out, 0, 0), []
    model.register_forward_hook(_recorder(trained, ran), with_kwargs=True)
    with warnings.catch_warnings(), _on_the_cpu():
        warnings.filterwarnings("ignore", "CUDA is not available", UserWarning)  # its autocast
        warnings.filterwarnings("ignore", ".*pin_memory", UserWarning)  # its loader pins
        warnings.simplefilter("ignore", FutureWarning)  # transformers' renamed kwargs
        loader = _loader(prep, model, args.seed)
        trainer = Trainer(model, _trainer_config(args, calls), loader, None)
        trainer.run_training()
    if ran != planned:  # step by step: the same batches, in the same order
        raise SystemExit(
            f"{out.name}: speculators' trainer ran {trained.steps} steps on {trained.tokens} "
            f"supervised tokens ({ran[:8]}...) where its sampler's batches planned {steps} on "
            f"{sum(planned)} ({planned[:8]}...)"
        )
    _keep_last(saves, epochs - 1, out)
    trained.seconds = time.monotonic() - started
    return trained


def plan(prep: Path, budget: Budget) -> tuple[int, list[int]]:
    """The epochs of speculators' trainer that spend the budget, and the supervised tokens
    of each of its steps: its sampler's packed batches at the run's seed, pass after pass (a
    new order each, as its trainer sets the epoch), up to the first batch that reaches it."""
    from datasets import load_from_disk
    from speculators.train.distributed_batch_sampler import MultipackDistributedBatchSamplerV2

    data = load_from_disk(str(prep)).with_format(None)  # lists, not tensors
    masks = [mask[1:] for mask in data["loss_mask"]]  # shift_batch drops each row's first
    sampler = MultipackDistributedBatchSamplerV2(
        batch_max_length=SEQ_LEN, lengths=data["seq_len"], num_replicas=1, rank=0, seed=budget.seed
    )
    steps: list[int] = []
    for epoch in range(1000):  # far above any budget here
        sampler.set_epoch(epoch)
        for batch in sampler:
            packed = [m for i in batch for m in masks[i]][:SEQ_LEN]  # its collate cuts here
            steps.append(sum(packed))
            if sum(steps) >= budget.tokens:
                return epoch + 1, steps
    raise SystemExit(f"the budget was not spent in 1000 passes over {prep}")


def _flags(
    prep: Path, target: Path, vocab: Path, seed: int, epochs: int, steps: int, saves: Path
) -> tuple[argparse.Namespace, tuple[dict, dict]]:
    """`speculators train`'s flags for this head, resolved by its own config (its defaults
    for the rest: weight decay, a linear schedule, a checkpoint each epoch), and saved
    beside its checkpoints as it saves them (run.yaml, train_command.txt)."""
    from speculators.model import SpeculatorModel
    from speculators.train.config import TrainConfig

    size = next(vocab.glob("d2t-*.npy")).stem.split("-")[1]
    flags = ["--speculator-type", "eagle3", "--verifier-name-or-path", str(target)]
    flags += ["--data-path", str(prep), "--target-layer-ids", *map(str, LAYERS)]
    flags += ["--d2t-path", str(vocab / f"d2t-{size}.npy")]
    flags += ["--t2d-path", str(vocab / f"t2d-{size}.npy"), "--draft-vocab-size", size]
    flags += ["--hidden-states-dtype", "float32", "--total-seq-len", str(SEQ_LEN)]
    flags += ["--draft-attn-impl", "sdpa", "--loss-implementation", "eager"]
    flags += ["--seed", str(seed), "--lr", str(LR), "--on-missing", "raise"]
    flags += ["--epochs", str(epochs), "--max-steps", str(steps), "--save-path", str(saves)]
    flags += ["--num-workers", "0", "--no-resume-from-checkpoint"]  # one process, fresh
    flags += ["--optimizer", "adamw"]  # its Muon, on the CPU, is ~7x the step: see the top
    config = TrainConfig.resolve(flags)
    config.save(str(saves))
    args = argparse.Namespace(**config.flatten())
    return args, SpeculatorModel.registry["eagle3"].get_trainer_kwargs(**vars(args))


def _head(args: argparse.Namespace) -> Any:
    """speculators' EAGLE-3 head, built as `speculators train` builds it from its flags."""
    from loguru import logger
    from speculators.model import SpeculatorModel
    from speculators.models.eagle3.rotary_partial import install_partial_neox_rotary
    from speculators.train.cli import build_draft_model, parse_vocab_mappings, set_seed

    set_seed(args.seed)
    install_partial_neox_rotary()  # as it does; a full-rotary target keeps HF's rotary
    d2t, t2d, draft_vocab = parse_vocab_mappings(args)
    logger.disable("speculators")  # where it loads the target's weights from, once per head
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # no mask token: it takes the pad token
        model_class = SpeculatorModel.registry["eagle3"]
        return build_draft_model(args, model_class, t2d, d2t, draft_vocab)


def _trainer_config(args: argparse.Namespace, calls: tuple[dict, dict]) -> Any:
    """Its TrainerConfig from the resolved flags, the fields `speculators train` fills."""
    import torch
    from speculators.train.trainer import TrainerConfig

    given = {f: getattr(args, f) for f in TrainerConfig._fields if hasattr(args, f)}
    given |= {"num_epochs": args.epochs, "train_call_kwargs": calls[0]}
    given |= {"resume_from_checkpoint": not args.no_resume_from_checkpoint}
    given |= {"val_call_kwargs": calls[1]}
    given |= {"hidden_states_dtype": getattr(torch, args.hidden_states_dtype)}
    return TrainerConfig(**given)


def _loader(prep: Path, model: Any, seed: int) -> Any:
    """Its loader on every row (its CLI would hold a validation share out: see the top),
    shuffled by the run's seed, as its CLI passes it (its own default is 0)."""
    import torch
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import ArrowDataset
    from speculators.train.dataloader import _setup_dataloader

    data = ArrowDataset(
        max_len=SEQ_LEN, datapath=str(prep), on_missing="raise", hidden_states_dtype=torch.float32
    )
    hidden = model.config.transformer_layer_config.hidden_size
    return _setup_dataloader(
        data,
        SEQ_LEN,
        hidden,
        num_workers=0,
        num_target_layers=len(LAYERS),
        preprocess=shift_batch,
        seed=seed,
    )


@contextmanager
def _on_the_cpu() -> Iterator[None]:
    """The two places speculators' trainer reaches for an accelerator, pointed at the CPU."""
    from unittest import mock

    import torch
    from speculators.train import trainer

    cpu = torch.device("cpu")
    with (
        # it places the head and each batch on get_local_rank(), an accelerator's index
        mock.patch.object(trainer, "get_local_rank", lambda: cpu),
        # its step timer waits for the accelerator's queue; the CPU's work is already done
        mock.patch.object(torch.accelerator, "synchronize", lambda *_: None),
    ):
        yield


def _recorder(trained: Trained, ran: list[int]) -> Any:
    """A forward hook that writes down each training step's supervised tokens (in `ran`) and
    loss (the trainer has no validation set here, so every forward is a step); it changes
    nothing."""

    def record(_module: Any, _args: Any, kwargs: dict, output: Any) -> None:
        ran.append(int(kwargs["loss_mask"].sum()))
        trained.steps += 1
        trained.tokens += ran[-1]
        trained.losses.append(output[1].item())

    return record


def _keep_last(saves: Path, epoch: int, out: Path) -> None:
    """The last checkpoint's head (its config, code and weights) and the run's config moved
    up into the draft folder; the rest, optimiser states too, removed (an arm never resumes)."""
    last = saves / str(epoch)
    for made in [*last.glob("*.json"), *last.glob("*.py"), *last.glob("*.safetensors")]:
        if made.name != "training_state.json":
            made.replace(out / made.name)
    (saves / "run.yaml").replace(out / "run.yaml")
    shutil.rmtree(saves)
