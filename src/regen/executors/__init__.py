"""Executors: how the parts of a generation run are started, above the run itself.

A run (`regen.run.generate`) only ever sees one `Part` (I of N) in its config; it does not
know whether it is the whole input in this process, one of N processes on Slurm, or a Ray
task. An executor decides that, and is chosen by name (`--executor`) from `EXECUTORS`.
"""

from __future__ import annotations

from regen.errors import ConfigError
from regen.executors.base import Executor, Outcome
from regen.executors.local import LocalExecutor
from regen.executors.ray import RayExecutor

EXECUTORS: dict[str, type[Executor]] = {"local": LocalExecutor, "ray": RayExecutor}

__all__ = ["EXECUTORS", "Executor", "Outcome", "executor_named"]


def executor_named(name: str, *, shards: int | None = None, address: str | None = None) -> Executor:
    try:
        kind = EXECUTORS[name]
    except KeyError:
        known = ", ".join(EXECUTORS)
        raise ConfigError(
            f"--executor {name!r} is not known", hint=f"use one of: {known}"
        ) from None
    return kind(shards=shards, address=address)
