"""The `regen` command line: one module per verb, each a thin layer over a library function.

Library code raises `regen.errors.RegenError`; only here does it become a message with a
hint and the error's exit code (2 for a user error; see `RegenError.exit_code`), so no
user ever sees a bare traceback for a mistake they can fix.
"""

from __future__ import annotations

import sys

import click

from regen import __version__
from regen.errors import RegenError


class RegenGroup(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except RegenError as err:
            click.secho(f"Error: {err.message}", fg="red", err=True)
            if err.hint:
                click.echo(f"  hint: {err.hint}", err=True)
            sys.exit(err.exit_code)


@click.group(cls=RegenGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="regen")
def main() -> None:
    """Regenerate training data for speculative-decoding drafters with the target model."""


def _register() -> None:
    from regen.cli import generate, status
    from regen.cli.prepare import prepare

    main.add_command(generate.generate)
    main.add_command(status.status)
    main.add_command(prepare)
    from regen.cli import check

    main.add_command(check.check)
    from regen.cli import export

    main.add_command(export.export)
    from regen.cli import serve

    main.add_command(serve.serve)
    from regen.cli import plan

    main.add_command(plan.plan)
    # Other verbs register here, one line each.


_register()
