"""`--workers`, `--executor` and `--ray-address`: how check, export and score spread rows.

One decorator, so the three verbs say the same thing, and one call that turns the options
into the `Workers` the library functions take (regen.executors.pool)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from regen.executors.pool import workers_for
from regen.parallel import Workers, cores


def worker_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--ray-address",
        metavar="ADDR",
        help="With --executor ray: the cluster [default: a new local one].",
    )(command)
    command = click.option(
        "--executor",
        type=click.Choice(["local", "ray"]),
        default="local",
        show_default=True,
        help="local: --workers processes here; ray: --workers actors on a Ray cluster.",
    )(command)
    return click.option(
        "--workers",
        type=click.IntRange(min=1),
        metavar="N",
        help="Processes that encode rows [default: every core]; the output is the same whatever N.",
    )(command)


def workers_of(options: dict[str, Any], per_worker: int = 1) -> Workers:
    """The workers the options ask for (taken out of `options`); without --workers, as many
    as the cores hold when each worker uses `per_worker` of them (a GGUF draft's threads).
    Local workers are held to the cores: each keeps one busy, so more only add memory (a
    copy of the tokenizer and rows in flight each) and a typo of 1000 could exhaust it."""
    here, executor = cores(), options.pop("executor")
    count = options.pop("workers") or max(1, here // max(1, per_worker))
    if executor == "local" and count > here:
        click.echo(
            f"warning: --workers {count} is more than the {here} cores this process "
            f"may use: running {here} (the output is the same whatever the number)",
            err=True,
        )
        count = here
    return workers_for(count, executor, options.pop("ray_address"))
