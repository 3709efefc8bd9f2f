"""A sampling option given once or as a comma-separated list (`--temperature 0.6,0.8,1.0`):
one value is that value; a list is a tuple of choices, one picked per sample (see
`Sampling.for_item`)."""

from __future__ import annotations

from typing import Any

import click


class OneOrList(click.ParamType):
    """`item` parses each value; a list of one value is that value."""

    def __init__(self, item: click.ParamType) -> None:
        self.item = item
        self.name = f"{item.name}[,...]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value  # a default, or a value already converted
        parts = [part.strip() for part in value.split(",")]
        if any(not part for part in parts):
            self.fail(f"{value!r} has an empty item; write e.g. 0.6,0.8,1.0", param, ctx)
        values = tuple(self.item.convert(part, param, ctx) for part in parts)
        if len(set(values)) != len(values):
            self.fail(f"{value!r} names a value twice", param, ctx)
        return values[0] if len(values) == 1 else values
