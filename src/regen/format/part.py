"""`--shard I/N`: a stable partition of the input by prompt id.

A prompt belongs to part `xxh3_64(id) % N`, whatever its line number, so the same prompt
always lands in the same part, inserting lines in the file moves nothing, and N processes on
N machines writing to one output location never do the same prompt twice. An input line
with no usable id (not JSON, say) belongs to part `line % N`, so exactly one part records it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import xxhash

from regen.errors import ConfigError


@dataclass(frozen=True)
class Part:
    index: int
    count: int
    # what made this process a part: `--shard`, or a scheduler's variables, which do it
    # unasked; the run says which at start and `regen status` shows it (not in equality)
    origin: str = field(default="--shard", compare=False)

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            given = "" if self.origin == "--shard" else f" (from {self.origin})"
            raise ConfigError(
                f"--shard {self.index}/{self.count}{given}: I must be in 0..N-1 and N at least 1",
                hint="for 4 machines use --shard 0/4, --shard 1/4, --shard 2/4, --shard 3/4",
            )

    @property
    def whole(self) -> bool:
        return self.count == 1

    @property
    def name(self) -> str:
        """Used in file names (progress, lock, staging), sorting in index order; empty for
        the whole input, whose files keep their plain names."""
        return "" if self.whole else f"{self.index:04d}-of-{self.count:04d}"

    @property
    def label(self) -> str:
        """How `--shard` and `regen status` write it: 3/8."""
        return f"{self.index}/{self.count}"

    def described(self) -> dict[str, Any] | None:
        """What the run says of itself at start and in its progress file (None: the whole).
        `environment`: set by a scheduler's variables, not by a flag of this command."""
        if self.whole:
            return None
        unasked = not self.origin.startswith("--")
        return {"part": self.label, "from": self.origin, "environment": unasked}

    def owns_id(self, prompt_id: str) -> bool:
        return self.whole or xxhash.xxh3_64_intdigest(prompt_id.encode()) % self.count == self.index

    def owns_line(self, line: int) -> bool:
        return self.whole or line % self.count == self.index

    def owns(self, prompt_id: str | int | None, line: int) -> bool:
        """By id when there is one (a duplicate id goes where its first use went)."""
        return self.owns_line(line) if prompt_id is None else self.owns_id(str(prompt_id))


WHOLE = Part(0, 1)


def parse_part(text: str) -> Part:
    index, sep, count = text.partition("/")
    if not sep or not index.strip().isdigit() or not count.strip().isdigit():
        raise ConfigError(f"--shard {text!r} is not I/N", hint="write it as --shard 3/8")
    return Part(int(index), int(count))


def part_from_env(env: Mapping[str, str] | None = None) -> Part:
    """The part a cluster scheduler gave this process: a Slurm array task, or a Kubernetes
    indexed job (JOB_COMPLETION_INDEX, with the count in REGEN_SHARD_COUNT, since Kubernetes
    does not pass `completions` to the pod). The whole input when neither is set."""
    env = os.environ if env is None else env
    if "SLURM_ARRAY_TASK_ID" in env and "SLURM_ARRAY_TASK_COUNT" in env:
        return _slurm_part(env)
    if "JOB_COMPLETION_INDEX" in env:
        if "REGEN_SHARD_COUNT" not in env:
            raise ConfigError(
                "JOB_COMPLETION_INDEX is set (a Kubernetes indexed job) but not the shard count",
                hint="set env REGEN_SHARD_COUNT to the job's `completions`, or pass --shard I/N",
            )
        index, count = _number(env, "JOB_COMPLETION_INDEX"), _number(env, "REGEN_SHARD_COUNT")
        return Part(index, count, _named(env, ["JOB_COMPLETION_INDEX", "REGEN_SHARD_COUNT"]))
    return WHOLE


def _slurm_part(env: Mapping[str, str]) -> Part:
    """Task ids need not be 0..N-1: `--array=1-16` starts at 1, `--array=0-15:4` runs tasks
    0, 4, 8 and 12 (SLURM_ARRAY_TASK_STEP 4, COUNT 4), so the part is the task's place in
    the array, (ID - MIN) / STEP. A list that is no range (`--array=1,3,7`) gives no place
    a task can work out from its variables: refused, with --shard as the way out."""
    used = ["SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"]
    used += ["SLURM_ARRAY_TASK_MIN"] if "SLURM_ARRAY_TASK_MIN" in env else []
    used += ["SLURM_ARRAY_TASK_STEP"] if env.get("SLURM_ARRAY_TASK_STEP", "1") != "1" else []
    origin = _named(env, used)  # what made the part (MAX only checks the range)
    task, count = _number(env, "SLURM_ARRAY_TASK_ID"), _number(env, "SLURM_ARRAY_TASK_COUNT")
    first = _number(env, "SLURM_ARRAY_TASK_MIN") if "SLURM_ARRAY_TASK_MIN" in env else 0
    step = _number(env, "SLURM_ARRAY_TASK_STEP") if "SLURM_ARRAY_TASK_STEP" in env else 1
    last = _number(env, "SLURM_ARRAY_TASK_MAX") if "SLURM_ARRAY_TASK_MAX" in env else None
    spaced = step >= 1 and (task - first) % step == 0
    if not spaced or (last is not None and last != first + step * (count - 1)):
        given = _named(env, sorted(k for k in env if k.startswith("SLURM_ARRAY_TASK_")))
        raise ConfigError(
            f"this Slurm array's task ids are not an evenly spaced range ({given}), so "
            "the task cannot tell which part of the prompts is its own",
            hint="submit the array as a range (--array=0-15, or 0-60:4 with a step), or "
            "pass --shard I/N to each task",
        )
    return Part((task - first) // step, count, origin)


def _named(env: Mapping[str, str], names: list[str]) -> str:
    return ", ".join(f"{name}={env[name]}" for name in names)


def _number(env: Mapping[str, str], name: str) -> int:
    text = env[name].strip()
    if not text.isdigit():
        raise ConfigError(
            f"{name}={env[name]!r} in the environment is not a whole number; it makes this "
            "process one part of the input",
            hint=f"unset {name}, or pass --shard I/N",
        )
    return int(text)
