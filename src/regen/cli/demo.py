"""`regen demo`: write the walkthrough's example files, so the README runs anywhere."""

from __future__ import annotations

import click

from regen.cli.options import Command
from regen.cli.paths import OutputPath
from regen.demo import top_names, write_examples
from regen.storage.destination import Destination


@click.command(cls=Command)
@click.argument("directory", default="examples", type=OutputPath("folder"))
def demo(directory: Destination) -> None:
    """Write the README walkthrough's files (recipe, sources, prompts) into DIRECTORY."""
    with directory.local_folder() as folder:
        written = write_examples(folder)
        names = top_names(written, folder)
    click.echo(f"wrote {len(written)} files to {directory}/ ({', '.join(names)})")
    click.echo(f"next: regen prepare {directory.join('recipe.yaml')} --output work/prompts.jsonl")
