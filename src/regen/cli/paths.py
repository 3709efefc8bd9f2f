"""The paths a verb's options and arguments name: every one that is written is an
`OutputPath`, every one only read an `InputPath`; a bare `click.Path` is refused by a test
(tests/test_output_paths.py scans every verb), so that no new option writes a bucket URL into
a local folder named `s3:`.

An `OutputPath` converts to a `Destination` (a file or a folder, a local path or a bucket URL,
written through a local stand-in and published whole; see `regen.storage.destination`), to the
run location a `Store` opens (`what="run"`), or, when the place must be on this machine
(`local=REASON`), to a Path after refusing a URL with that reason.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any, Literal

import click

from regen.cli.options import STDOUT_TAKEN
from regen.errors import ConfigError
from regen.output_place import place_of
from regen.storage.destination import Destination
from regen.urls import is_url

What = Literal["file", "folder", "run"]


class OutputPath(click.ParamType):
    name = "output"

    def __init__(self, what: What, local: str | None = None) -> None:
        self.what = what
        self.local = local  # why a bucket URL is refused; None: a bucket URL is taken

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, Destination | Path):
            return value
        text = str(value)
        if self.local is not None:
            if is_url(text) and not text.startswith("file://"):
                self.fail(f"{text} is a URL; this takes a path on this machine: {self.local}")
            path = Path(text.removeprefix("file://"))
            self._looked_at(path, flag_of(param), ctx)
            return path
        if not is_url(text) or text.startswith("file://"):
            self._looked_at(Path(text.removeprefix("file://")), flag_of(param), ctx)
        if self.what == "run":
            return text  # a str: the run opens its Store from it (a Path folds s3:// to s3:/)
        return Destination(text, flag_of(param))

    def _looked_at(self, path: Path, flag: str, ctx: click.Context | None) -> None:
        """Before any work: a device, a FIFO or a socket (or a file where a folder goes) is
        refused with the reason, exit 2; a stream is taken only where nothing reads it back."""
        place = place_of(path, flag, "file" if self.what == "file" else "folder")
        if place.is_stream and self.local is not None:
            raise ConfigError(
                f"cannot write {flag} {path}: it is {place.about}, and {self.local}",
                hint=f"give {flag} a file path",
            )
        if place.fd == 1 and ctx is not None:
            ctx.meta[STDOUT_TAKEN] = True


class InputPath(click.Path):
    """A path that is only read. `buckets`: a URL is taken as it is (a str: click.Path would
    fold `s3://b` into `s3:/b`); otherwise a local path, checked as click.Path checks it."""

    def __init__(self, buckets: bool = False, **path_options: Any) -> None:
        super().__init__(path_type=Path, **path_options)
        self.buckets = buckets

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        if self.buckets and is_url(str(value)):
            return str(value)
        return super().convert(value, param, ctx)


def flag_of(param: click.Parameter | None) -> str:
    """How messages name the option: its long flag, or an argument's metavar."""
    if param is None:
        return "the output"
    if isinstance(param, click.Option):
        return next((o for o in param.opts if o.startswith("--")), param.opts[0])
    return param.human_readable_name


def local_file(destination: Destination | None):
    """`destination.local_file()`, or nothing to write when the option was not given."""
    return nullcontext(None) if destination is None else destination.local_file()
