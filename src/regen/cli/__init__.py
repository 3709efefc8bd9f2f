"""The `regen` command line: one module per verb, each a thin layer over a library function.

Library code raises `regen.errors.RegenError`; only here does it become a message with a
hint and the error's exit code (2 for a user error; see `RegenError.exit_code`), so no
user ever sees a bare traceback for a mistake they can fix.
"""

from __future__ import annotations

import difflib
import importlib
import sys

import click

from regen import __version__
from regen.errors import RegenError

# Each verb's module is imported only when that verb runs: `regen generate` must not pay for
# matplotlib, datasets and tokenizers (about 70 MB) that only check, export and prepare use.
VERBS = {
    "prepare": "regen.cli.prepare:prepare",
    "plan": "regen.cli.plan:plan",
    "serve": "regen.cli.serve:serve",
    "generate": "regen.cli.generate:generate",
    "status": "regen.cli.status:status",
    "check": "regen.cli.check:check",
    "export": "regen.cli.export:export",
    "score": "regen.cli.score:score",
    "demo": "regen.cli.demo:demo",
}
# `regen --help` lists these whole sentences (click would cut each docstring at 45
# characters, mid-phrase); each fits an 80-column terminal
SUMMARIES = {
    "prepare": "Build one blended prompt file from datasets and a recipe.",
    "plan": "Estimate the wall time, tokens and cost of a run.",
    "serve": "Start, look at or stop inference servers, one per GPU group.",
    "generate": "Generate completions for every prompt; rerun it to resume.",
    "status": "Show how far a run is, how fast it goes, and when it ends.",
    "check": "Judge whether a run is trainable, with the target's template.",
    "export": "Write a run in the format a trainer reads.",
    "demo": "Write the walkthrough's example files into a directory.",
    "score": "Measure how many drafted tokens a drafter accepts, by domain.",
}


class RegenGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(VERBS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in VERBS:
            return None
        module, attr = VERBS[name].split(":")
        command = getattr(importlib.import_module(module), attr)
        command.short_help = SUMMARIES[name]
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """`regen --help` lists the verbs from SUMMARIES, importing none of them: click's own
        listing loads each command (and so datasets, matplotlib, torch...) for its help."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, SUMMARIES[name]) for name in VERBS])

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in VERBS:
            close = difflib.get_close_matches(name, list(VERBS), n=1)
            ctx.fail(
                f"No such command '{name}'." + (f" Did you mean '{close[0]}'?" if close else "")
            )
        return super().resolve_command(ctx, args)

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
