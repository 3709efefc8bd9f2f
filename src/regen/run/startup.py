"""What `regen generate` checks before it starts a server, loads a model or creates a file
(the cheap checks first, so a typo costs a second, not a server start), and the promise that
a run which fails before it wrote anything leaves no directory of its own behind: one holding
only `run.lock` would look like a run to `regen status` and to the next `generate`."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from regen.errors import ConfigError
from regen.fleet.embedded import SERVER_LOGS
from regen.format.manifest import InputFingerprint, check_same_input, fingerprint, read_manifest
from regen.run.config import GenerateConfig
from regen.run.input_gate import check_input
from regen.storage import Store
from regen.urls import is_url


def check_prompts(config: GenerateConfig) -> InputFingerprint:
    """The prompt file exists and is one; its fingerprint for the manifest."""
    check_input(config.input.prompts)
    return fingerprint(config.input.prompts)


def check_output_matches(store: Store, config: GenerateConfig, input_fp: InputFingerprint):
    """An output dir started from another prompt file is refused before any server starts
    (the manifest check after preflight repeats this, with the sampling and shards)."""
    if config.input.allow_changed_input:
        return
    previous = read_manifest(store.layout.manifest)
    if previous is not None:
        check_same_input(previous, input_fp, str(config.input.prompts))


class Leftovers:
    """What a failed start may remove. `server_logs`: the embedded server started, so when
    the run is then refused (a ConfigError: a flag the server cannot honour, say), its logs
    say nothing of why."""

    server_logs = False


@contextlib.contextmanager
def leave_nothing_behind(location: str | Path) -> Iterator[Leftovers]:
    """If the run's local directory did not exist and the run fails while it holds nothing
    but its lock (and the logs of an embedded server that started well), remove it again.
    (Server logs of a failed embedded start stay: they say why.) A bucket run's staging is
    the store's own business."""
    text = str(location).removeprefix("file://")
    root = None if is_url(text) else Path(text)
    fresh = root is not None and not root.exists()
    leftovers = Leftovers()
    try:
        yield leftovers
    except BaseException as exc:
        if fresh and root is not None:
            refused = isinstance(exc, ConfigError)
            _remove_if_only_locks(root, server_logs=leftovers.server_logs and refused)
        raise


def _remove_if_only_locks(root: Path, server_logs: bool) -> None:
    if not root.is_dir():
        return
    entries = list(root.iterdir())
    logs = root / SERVER_LOGS
    if server_logs and logs.is_dir() and all(p.is_file() for p in logs.iterdir()):
        entries.remove(logs)
    else:
        logs = None
    if all(p.is_file() and p.name.startswith("run") and p.suffix == ".lock" for p in entries):
        for path in entries:
            path.unlink()
        if logs is not None:
            shutil.rmtree(logs)
        root.rmdir()
