"""`regen generate --executor ray`: the N parts of a run as Ray tasks.

Each task is an ordinary `generate()` of one part (`--shard i/N`), so it knows nothing of
Ray, and Ray knows nothing of it beyond "run this function, again if its worker dies". A
retried task resumes its part from the output location, which is the ledger (with a bucket
`--output-dir`, from the bucket, whichever node it lands on). Every task drives the servers in
the config: the same `--servers` everywhere (a router, say), or a `--fleet` file read on the
node the task runs on (one fleet file per node, at the same path). `ray` is an optional extra.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from regen.errors import ConfigError
from regen.executors.base import Executor, Outcome
from regen.format.part import Part
from regen.run.config import GenerateConfig

MAX_RETRIES = 3  # a task whose worker process dies is started again this often


@dataclass(frozen=True)
class PartResult:
    part: str
    exit_code: int
    message: str
    host: str
    pid: int


def run_part(config: GenerateConfig, index: int, count: int) -> PartResult:
    """One Ray task: generate part `index` of `count`, resuming whatever is already there."""
    import socket

    from regen.run.generate import generate

    part = Part(index, count, f"--executor ray --shards {count}")
    # Ray runs a task again only when its worker died; on another node, the dead worker's
    # lease on a bucket part is still fresh for a while: wait for it to lapse.
    upload = replace(config.output.upload, lease_wait=True)
    output = replace(config.output, upload=upload)
    display = replace(config.display, mode="none")
    result = generate(replace(config, part=part, display=display, output=output))
    label = f"{index}/{count}"
    return PartResult(label, result.exit_code, result.message, socket.gethostname(), os.getpid())


def run_on_ray(
    config: GenerateConfig,
    parts: int,
    address: str | None = None,
    *,
    init_options: dict[str, Any] | None = None,
) -> list[PartResult]:
    """Run `parts` tasks on the Ray cluster at `address` (None: start a local one)."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            "--executor ray needs Ray", hint="pip install 'regen[ray]' (Ray 2.x)"
        ) from exc
    if parts < 1:
        raise ConfigError("--shards must be at least 1")
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, log_to_driver=False, **(init_options or {}))
    try:
        task = ray.remote(max_retries=MAX_RETRIES, num_cpus=1)(run_part)
        refs = [task.remote(config, i, parts) for i in range(parts)]
        return list(ray.get(refs))
    finally:
        if started_here:
            ray.shutdown()


class RayExecutor(Executor):
    """`--executor ray --shards N [--ray-address ADDR]`."""

    def run(self, config: GenerateConfig) -> Outcome:
        if not self.shards:
            raise ConfigError(
                "--executor ray needs --shards N (how many parts to run)",
                hint="add --shards 8, say, for 8 parts as Ray tasks",
            )
        results = run_on_ray(config, self.shards, self.address)
        lines = [
            f"shard {r.part} ({r.host}, pid {r.pid}): exit {r.exit_code}: {r.message}"
            for r in results
        ]
        return Outcome(max(r.exit_code for r in results), lines)
