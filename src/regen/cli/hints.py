"""Messages that point the right way: choices that forgive case and suggest the value that
was meant, and the tokenizer a run was made with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from regen.errors import did_you_mean
from regen.run.status import model_of


class Choice(click.Choice):
    """A click.Choice that ignores case where that is unambiguous, says "did you mean" for a
    misspelling, and answers names users know from elsewhere (`pointers`: value -> what to
    pass instead, and why)."""

    def __init__(self, choices: Sequence[str], pointers: Mapping[str, str] | None = None):
        super().__init__(choices, case_sensitive=False)
        self.pointers = {k.lower(): v for k, v in (pointers or {}).items()}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            text = str(value)
            if text.lower() in self.pointers:
                self.fail(f"{text!r}: {self.pointers[text.lower()]}", param, ctx)
            meant = did_you_mean(text, [str(c) for c in self.choices])
            guess = f"; did you mean {meant!r}?" if meant else ""
            allowed = ", ".join(repr(c) for c in self.choices)
            self.fail(f"{text!r} is not one of {allowed}{guess}", param, ctx)


def tokenizer_hint(runs: Sequence[str]) -> str:
    """What to pass as --tokenizer: the model the first run was generated with, when its
    manifest says (`embedded` for the embedded model)."""
    model = model_of(runs[0]) if runs else None
    if not model:
        return "pass --tokenizer with the target model (a hub name, a directory or a .gguf)"
    return (
        f"this run was generated with {model}: pass --tokenizer {model} (or the drafter's "
        "target model, a directory or a .gguf)"
    )
