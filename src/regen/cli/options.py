"""What every verb's command line shares: options shown in named groups in `--help`, old
spellings that keep working without being shown, and options that take several values
after one flag (`--servers A B C`).

A verb declares `@click.command(cls=Command)` and `@option("--x", group=FLEET, help=...)`.
Groups are listed in the order of GROUP_ORDER; an option without a group lands in the
last section, "Other options", next to `-h/--help`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

INPUT = "Input"
FLEET = "Fleet"
SAMPLING = "Sampling"
RELIABILITY = "Reliability"
OUTPUT = "Output"
DISPLAY = "Display"
SCALE = "Many machines"
GROUP_ORDER = (INPUT, FLEET, SAMPLING, RELIABILITY, OUTPUT, SCALE, DISPLAY)
OTHER = "Other"


class Option(click.Option):
    """A click option with a help `group`, hidden `aliases` (old spellings that still work)
    and `multi_value`: every bare word after the flag is one more value. `to` names the
    config field it sets (a dotted path, see `regen.run.config.build_config`), and `into`
    turns its value into that field's."""

    def __init__(
        self,
        param_decls: Sequence[str],
        *,
        group: str | None = None,
        aliases: Sequence[str] = (),
        multi_value: bool = False,
        to: str | None = None,
        into: Callable[[Any], Any] | None = None,
        **attrs: Any,
    ) -> None:
        super().__init__([*param_decls, *aliases], **attrs)
        self.group = group
        self.aliases = tuple(aliases)
        self.multi_value = multi_value
        self.to, self.into = to, into

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown, self.opts = self.opts, [o for o in self.opts if o not in self.aliases]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown


def option(*param_decls: str, **attrs: Any) -> Callable[[Any], Any]:
    """`click.option` with this module's Option class."""
    return click.option(*param_decls, cls=Option, **attrs)


def config_values(command: click.Command, opts: dict[str, Any]) -> dict[str, Any]:
    """{config path: value} of every option of `command` that declares where it goes."""
    values: dict[str, Any] = {}
    for param in command.params:
        to = getattr(param, "to", None)
        if to is not None and param.name in opts:
            into = getattr(param, "into", None)
            value = opts[param.name]
            values[to] = into(value) if into is not None else value
    return values


STDOUT_TAKEN = "regen.stdout_taken"  # ctx.meta: an output is this process's standard output


class Command(click.Command):
    """A command whose `--help` shows its options by group."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # the words as typed: the manifest keeps them, so `regen status` can print the
        # exact command that resumes the run
        ctx.meta["regen.argv"] = ["regen", ctx.info_name or "", *args]
        try:
            return super().parse_args(ctx, expand_multi_value(self.params, args))
        except click.NoSuchOption as err:
            # suggest the current spelling, not a hidden old one
            current = {
                a: p.opts[0] for p in self.params if isinstance(p, Option) for a in p.aliases
            }
            err.possibilities = sorted({current.get(o, o) for o in err.possibilities or ()})
            raise

    def invoke(self, ctx: click.Context) -> Any:
        if not ctx.meta.get(STDOUT_TAKEN):
            return super().invoke(ctx)
        # an output streams to standard output (`--json /dev/stdout | jq`): what the verb
        # says to people goes to stderr, so that the stream holds only the file
        with contextlib.redirect_stdout(sys.stderr):
            return super().invoke(ctx)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            if not isinstance(param, click.Option):
                continue  # arguments are named in the usage line
            record = param.get_help_record(ctx)
            if record is not None:
                sections.setdefault(getattr(param, "group", None) or OTHER, []).append(record)
        known = [g for g in GROUP_ORDER if g in sections]
        extra = [g for g in sections if g not in GROUP_ORDER and g != OTHER]
        titled = len(sections) > 1
        for title in [*known, *extra, OTHER]:
            if title in sections:
                with formatter.section(f"{title} options" if titled else "Options"):
                    formatter.write_dl(sections[title])


def expand_multi_value(params: Sequence[click.Parameter], args: list[str]) -> list[str]:
    """`--servers A B C` -> `--servers A --servers B --servers C`, so that click parses
    the rest strictly (an unknown option is an error with "did you mean", not a URL)."""
    flags = {
        name
        for p in params
        if getattr(p, "multi_value", False)
        for name in p.opts  # type: ignore[attr-defined]
    }
    out: list[str] = []
    current: str | None = None
    for arg in args:
        if arg == "--":
            current = None
        elif arg.startswith("-"):
            current = arg if arg in flags else None
            if "=" in arg and arg.split("=", 1)[0] in flags:
                current = arg.split("=", 1)[0]
        elif current is not None and out and out[-1] != current:
            out.append(current)
        out.append(arg)
    return out
