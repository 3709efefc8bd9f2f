"""`regen prepare`: build one deduplicated, blended prompt file from a recipe or quick flags."""

from __future__ import annotations

import sys
from dataclasses import replace

import click

from regen.cli.options import Command
from regen.cli.paths import InputPath, OutputPath
from regen.cli.rowbar import row_progress
from regen.errors import ConfigError, InputFileError
from regen.prepare import Recipe, load_recipe
from regen.prepare import prepare as run_prepare
from regen.prepare.recipe import check_blend, parse_source
from regen.prepare.recipe_fields import parse_role_map_flags

MOSTLY_REJECTED = 0.5  # a source that loses this share or more to rejects fails the command


@click.command(cls=Command)
@click.argument(
    "recipe", required=False, type=InputPath(buckets=True, dir_okay=False), metavar="[RECIPE]"
)
@click.option(
    "--output",
    "-o",
    required=True,
    type=OutputPath("file"),
    help="The prompt file to write (JSONL), as `regen generate` reads it (or a bucket URL).",
)
@click.option("--source", "sources", multiple=True, help="A local file or glob; repeatable.")
@click.option("--format", "fmt", help="Format of the --source files (default: auto-detect).")
@click.option("--total", type=click.IntRange(min=0), help="Target number of prompts.")
@click.option("--seed", type=int, help="Seed of the blend (the same seed, the same file).")
@click.option(
    "--role-map",
    multiple=True,
    metavar="LABEL=ROLE",
    help="Map an unknown role label, e.g. --role-map bot=assistant; repeatable.",
)
@click.option(
    "--keep-multimodal",
    is_flag=True,
    default=None,
    help="Keep image/audio blocks instead of dropping them (counted either way).",
)
@click.option("--tokenizer", help="tokenizer.json, model directory or Hub name for lengths.")
@click.option(
    "--rejects",
    type=OutputPath("file"),
    help="Rejects file [default: OUTPUT with .rejects.jsonl].",
)
@click.option(
    "--report",
    type=OutputPath("file"),
    help="Report JSON [default: OUTPUT with .report.json].",
)
def prepare(
    recipe, output, sources, fmt, total, seed, role_map, keep_multimodal, tokenizer, rejects, report
) -> None:
    """Read the sources in RECIPE (or --source files), convert, dedup and blend them.

    Writes OUTPUT, a rejects file saying what to change for every record left out, and a
    report: per-source counts, dedup rates, composition by source and category.
    """
    if not recipe and not sources:
        raise ConfigError(
            "give a RECIPE.yaml or at least one --source",
            hint="regen prepare recipe.yaml -o prompts.jsonl",
        )
    base = load_recipe(recipe) if recipe else Recipe(sources=())
    extra = tuple(
        replace(
            parse_source({"path": p, "format": fmt, **_ask(total)}, f"--source {p}"),
            from_flags=True,
        )
        for p in sources
    )
    merged = base.with_overrides(
        sources=base.sources + extra,
        total=total,
        seed=seed,
        tokenizer=tokenizer,
        keep_multimodal=keep_multimodal,
        role_map={**base.role_map, **parse_role_map_flags(role_map)},
    )
    check_blend(merged)
    log = lambda line: click.echo(line, err=True)  # noqa: E731
    with row_progress("prepare") as on_row:
        # prepare stages and publishes its three files itself (storage.publish.staged)
        result = run_prepare(
            merged,
            output.where,
            rejects=rejects and rejects.where,
            report=report and report.where,
            log=log,
            on_row=on_row,
        )
    click.echo(result.render())
    halved = [s["name"] for s in result.data["sources"] if rejected_share(s) >= MOSTLY_REJECTED]
    if halved:  # written and kept, but no success: a script must not go on as if it were
        click.secho(
            f"Error: half or more of the records of {', '.join(halved)} were rejected; "
            f"the reasons are in the rejects file",
            fg="red",
            err=True,
        )
        sys.exit(InputFileError.exit_code)


def rejected_share(source: dict) -> float:
    return sum(source["rejected"].values()) / source["read"] if source["read"] else 0.0


def _ask(total: int | None) -> dict:
    """Quick sources share --total equally, or are taken whole without one."""
    return {"weight": 1} if total is not None else {"count": "all"}
