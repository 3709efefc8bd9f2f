"""Format adapters, one per input shape, and auto-detection that says what it chose and why."""

from __future__ import annotations

from regen.errors import ConfigError
from regen.prepare.formats.base import Adapter, Converted, Options
from regen.prepare.formats.function_calling import FunctionCalling
from regen.prepare.formats.openai import OpenAIMessages
from regen.prepare.formats.pairs import InstructionPairs
from regen.prepare.formats.sharegpt import ShareGPT
from regen.prepare.formats.traces import Traces

# Detection order matters: the more specific shapes first.
ADAPTERS: tuple[type[Adapter], ...] = (
    Traces,
    FunctionCalling,
    ShareGPT,
    OpenAIMessages,
    InstructionPairs,
)
BY_NAME = {a.name: a for a in ADAPTERS}
ALIASES = {"hermes": "function_calling", "messages": "openai", "alpaca": "pairs", "trace": "traces"}


def resolve(name: str) -> type[Adapter]:
    key = ALIASES.get(name, name)
    if key not in BY_NAME:
        raise ConfigError(
            f"unknown format {name!r}",
            hint=f"use one of {', '.join(BY_NAME)} (or leave it out to auto-detect)",
        )
    return BY_NAME[key]


def detect(row: dict) -> tuple[type[Adapter], str] | None:
    """The adapter for this row and the reason, or None when no adapter recognises it."""
    for adapter in ADAPTERS:
        reason = adapter.detect(row)
        if reason:
            return adapter, reason
    return None


__all__ = ["ADAPTERS", "Adapter", "Converted", "Options", "detect", "resolve"]
