"""`--device`, `--dtype` and `--max-batch-tokens`: where `score` runs the target a checkpoint
reads (and the checkpoint, and a Hugging Face draft model), at which precision, and how many
padded tokens one forward of the target takes (placement.py); `--head-draws`: how a head is
scored on sampled answers (sampled_chain.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from regen.score.checkpoints.placement import DTYPES, MAX_BATCH_TOKENS, Placement
from regen.score.checkpoints.sampled_chain import DRAWS
from regen.score.checkpoints.settings import CheckpointSettings


def checkpoint_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--head-draws",
        type=click.Choice(DRAWS),
        default="sampled",
        show_default=True,
        help="On answers drawn at a temperature, an EAGLE-3 or DFlash head is scored as "
        "sampling at that temperature (min(1, q/p) per depth, as a draft model is), or by "
        "its greedy chain (argmax: as vLLM drafts an EAGLE head at any temperature).",
    )(command)
    command = click.option(
        "--max-batch-tokens",
        type=click.IntRange(min=1),
        default=MAX_BATCH_TOKENS,
        show_default=True,
        metavar="N",
        help="Padded tokens per forward of the target (rows sorted by length, batched under "
        "N; a longer row goes alone): the memory bound of the hidden-state pass.",
    )(command)
    command = click.option(
        "--dtype",
        type=click.Choice(DTYPES),
        default="auto",
        show_default=True,
        help="Precision of the target and the checkpoint (auto: bfloat16 on a GPU, float32 "
        "on the CPU).",
    )(command)
    return click.option(
        "--device",
        default="cpu",
        show_default=True,
        metavar="D",
        help="Where the target and the checkpoint run: cpu, cuda (every GPU; a target too "
        "big for one is split over them), cuda:N, or auto (a GPU when torch sees one).",
    )(command)


def checkpoint_settings(options: dict[str, Any], target: str | None, depth: int) -> Any:
    """The settings the options ask for (taken out of `options`), the placement checked."""
    placement = Placement(
        options.pop("device"), options.pop("dtype"), options.pop("max_batch_tokens")
    ).resolved()
    return CheckpointSettings(target, depth, placement, draws=options.pop("head_draws"))
