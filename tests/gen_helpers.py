"""Helpers for generate tests: prompt files, a quiet library run, and the exactly-once check."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from regen.fleet.dispatch import HealthPolicy, RetryPolicy
from regen.fleet.server import Timeouts
from regen.format.layout import OutputLayout
from regen.run.config import GenerateConfig, build_config
from regen.run.generate import RunResult, generate


def write_prompts(path: Path, n: int, *, extra: dict[str, Any] | None = None) -> list[str]:
    ids = [f"p{i:05d}" for i in range(n)]
    with open(path, "wb") as fh:
        for pid in ids:
            record = {"id": pid, "messages": [{"role": "user", "content": f"question {pid}"}]}
            fh.write(orjson.dumps({**record, **(extra or {})}) + b"\n")
    return ids


# The flat names tests use, and where each lives in the config's groups.
FIELD_PATHS = {
    "prompts": "input.prompts",
    "samples_per_prompt": "input.samples_per_prompt",
    "regenerate_turns": "input.regenerate_turns",
    "retry_errors": "input.retry_errors",
    "tool_divergence": "input.tool_divergence",
    "tool_server": "input.tool_server",
    "allow_changed_input": "input.allow_changed_input",
    "allow_changed_sampling": "input.allow_changed_sampling",
    "output_dir": "output.dir",
    "compress": "output.compress",
    "return_token_ids": "output.return_token_ids",
    "logprobs": "output.logprobs",
    "staging_dir": "output.staging_dir",
    "shard_max_records": "output.shard_max_records",
    "shard_max_bytes": "output.shard_max_bytes",
    "upload_interval": "output.upload_interval",
    "upload": "output.upload",
    "servers": "fleet.servers",
    "fleet": "fleet.fleet_file",
    "local_model": "fleet.local_model",
    "model": "fleet.model",
    "api_key_env": "fleet.api_key_env",
    "concurrency": "fleet.concurrency",
    "fixed_concurrency": "fleet.fixed_concurrency",
    "dispatch": "fleet.dispatch",
    "timeouts": "fleet.timeouts",
    "retry": "fleet.retry",
    "health": "fleet.health",
    "quality": "limits.quality",
    "abort_on_degenerate": "limits.abort_on_degenerate",
    "drain_timeout": "limits.drain_timeout",
    "display": "display.mode",
    "snapshot_interval": "display.snapshot_interval",
    "log_interval": "display.log_interval",
    "sampling": "sampling",
    "part": "part",
    "limit": "input.limit",
}


def quick_config(prompts: Path, output: Path, servers: list[str], **overrides) -> GenerateConfig:
    """Fast timeouts and backoff so fault tests finish in seconds."""
    fields: dict[str, Any] = {
        "prompts": prompts,
        "output_dir": output,
        "servers": servers,
        "concurrency": 4,
        "display": "none",
        "snapshot_interval": 0.2,
        "timeouts": Timeouts(request=10, connect=2),
        "retry": RetryPolicy(max_retries=3, base_delay=0.05, max_delay=0.3),
        "health": HealthPolicy(
            liveness_interval=0.5, liveness_timeout=0.5, liveness_failures=2, give_up_after=30
        ),
        "drain_timeout": 5,
    }
    fields.update(overrides)
    return build_config({FIELD_PATHS[name]: value for name, value in fields.items()})


def run(prompts: Path, output: Path, servers: list[str], **overrides) -> RunResult:
    return generate(quick_config(prompts, output, servers, **overrides))


def read_lines(output: Path, kind: str) -> list[dict]:
    return list(OutputLayout.at(output).iter_records(kind))


def assert_exactly_once(output: Path, ids: list[str], samples: int = 1) -> tuple[list, list]:
    """Every (id, sample) is in exactly one line across completions/ and errors/."""
    completions = read_lines(output, "completions")
    errors = [e for e in read_lines(output, "errors") if e.get("sample") is not None]
    seen = Counter((r["id"], r["sample"]) for r in completions + errors)
    expected = {(i, s) for i in ids for s in range(samples)}
    duplicated = {k: c for k, c in seen.items() if c > 1}
    assert not duplicated, f"duplicated: {list(duplicated)[:5]}"
    missing = expected - set(seen)
    assert not missing, f"{len(missing)} missing, e.g. {sorted(missing)[:5]}"
    extra = set(seen) - expected
    assert not extra, f"unexpected keys {sorted(extra)[:5]}"
    return completions, errors


def fill_disk_after(monkeypatch, records: int) -> None:
    """Every shard write after the first `records` fails as on a full disk (ENOSPC)."""
    import errno

    from regen.format.writer import ShardWriter

    real_write = ShardWriter.write
    calls = {"n": 0}

    def fill_up(self, record, line):
        calls["n"] += 1
        if calls["n"] > records:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(self, record, line)

    monkeypatch.setattr(ShardWriter, "write", fill_up)


READ_ONLY_MOUNT = 'mount --bind -o ro "$0" "$0" && exec "$@"'


def run_with_read_only(
    read_only: Path, command: list[str], timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run `command` with `read_only` not writable, as root too (root ignores permissions,
    so the dir is also mounted read-only in a private mount namespace)."""
    if os.geteuid() == 0:
        command = ["unshare", "-m", "sh", "-c", READ_ONLY_MOUNT, str(read_only), *command]
    read_only.chmod(0o555)
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    finally:
        read_only.chmod(0o755)
