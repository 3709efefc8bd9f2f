"""`regen demo`: write the walkthrough's example files, so the README runs anywhere."""

from __future__ import annotations

from pathlib import Path

import click

from regen.cli.options import Command
from regen.demo import top_names, write_examples


@click.command(cls=Command)
@click.argument("directory", default="examples", type=click.Path(path_type=Path))
def demo(directory: Path) -> None:
    """Write the README walkthrough's files (recipe, sources, prompts) into DIRECTORY."""
    written = write_examples(directory)
    click.echo(
        f"wrote {len(written)} files to {directory}/ ({', '.join(top_names(written, directory))})"
    )
    click.echo(f"next: regen prepare {directory / 'recipe.yaml'} --output work/prompts.jsonl")
