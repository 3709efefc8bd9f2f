"""`regen export`'s options beyond the format: which rows and masks, and the published dataset."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from functools import reduce
from pathlib import Path
from typing import Any

import click

from regen.cli.options import option
from regen.cli.paths import InputPath

PATH = click.Path(path_type=Path)
Decorator = Callable[[Any], Any]


def _all(*decorators: Decorator) -> Decorator:
    """The decorators applied as if written one above the other."""
    return lambda command: reduce(lambda cmd, deco: deco(cmd), reversed(decorators), command)


selection_options = _all(
    click.option(
        "--tokenizer",
        help="Target tokenizer (tokenised formats, mask filters, check, draft vocabulary).",
    ),
    click.option("--chat-template", help="Jinja file that overrides the tokenizer's template."),
    click.option(
        "--template-tokens",
        type=click.Choice(["train", "context"]),
        default="train",
        show_default=True,
    ),
    click.option(
        "--supervise",
        type=click.Choice(["regenerated", "all"]),
        default="regenerated",
        show_default=True,
        help="Train only the assistant turns the target wrote, or "
        "every assistant turn (also those that came with the prompt).",
    ),
    click.option("--drop-degenerate", is_flag=True, help="Drop empty answers and tiny masks."),
    click.option("--degenerate-at", type=int, default=10, show_default=True),
    click.option("--drop-truncated", is_flag=True, help="Drop finish_reason=length samples."),
    click.option("--min-supervised-tokens", type=int, default=0, show_default=True),
    option(
        "--val-fraction",
        "eval_fraction",
        type=float,
        default=0.0,
        show_default=True,
        aliases=["--eval-fraction"],
        help="Share of prompts (by seeded hash of the prompt id) in the validation split.",
    ),
    click.option(
        "--split-seed",
        type=int,
        default=0,
        show_default=True,
        help="Seed of the validation split's hash.",
    ),
    click.option(
        "--holdout",
        type=float,
        metavar="F",
        help="Hold out F of the prompts (per category) in a `holdout` split, for "
        "`regen score --holdout F`.",
    ),
    click.option(
        "--holdout-seed",
        type=int,
        default=0,
        show_default=True,
        help="Seed of the held-out split (give score the same).",
    ),
    click.option(
        "--max",
        "limits",
        multiple=True,
        metavar="RULE=FRACTION",
        help="A check rule's threshold for the verdict in the card (as `regen check`).",
    ),
)

dataset_options = _all(
    click.option(
        "--license",
        "licenses",
        multiple=True,
        metavar="[SOURCE=]SPDX",
        help="License of every source, or of one source (repeatable).",
    ),
    click.option("--language", multiple=True, metavar="CODE", help="Language(s) of the rows."),
    click.option("--pretty-name", help="The dataset's name in the card."),
    click.option(
        "--check-report",
        type=InputPath(),
        help="A `regen check --json` report for the card (without --tokenizer).",
    ),
    click.option(
        "--draft-vocab-size",
        type=int,
        metavar="N",
        help="Write the d2t/t2d mapping of the N most frequent supervised tokens.",
    ),
    click.option(
        "--target-vocab-size",
        type=int,
        metavar="N",
        help="The target model's vocab_size, when it exceeds the tokenizer's.",
    ),
    click.option("--push-to-hub", metavar="ORG/NAME", help="Upload the export as a dataset."),
    click.option("--private", is_flag=True, help="Create the Hub repo private."),
    click.option("--revision", metavar="BRANCH", help="Push to this branch of the repo."),
    click.option(
        "--allow-failed-check",
        is_flag=True,
        help="Push even when the export failed (or skipped) `regen check`.",
    ),
)


def command_line(ctx: click.Context) -> str:
    """The `regen export` line that reproduces this export: arguments and non-default flags."""
    words = ["regen", ctx.info_name or "export"]
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if isinstance(param, click.Argument):
            words += [str(v) for v in value or ()]
        elif isinstance(param, click.Option) and value not in (param.default, None, (), False):
            flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
            for item in value if isinstance(value, tuple) else [value]:
                words += [flag] if item is True else [flag, str(item)]
    return shlex.join(words)
