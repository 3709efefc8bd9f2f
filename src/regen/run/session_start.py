"""What a session does before its first request: compare its settings with the manifest's
earlier sessions (refusing silent changes) and record itself, then read the output files,
the ledger of what is finished, repairing what a killed run left."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from regen.errors import OutputError, RegenError
from regen.format.manifest import InputFingerprint, check_and_record, same_lines_inputs
from regen.run import ledger as ledger_mod
from regen.run.config import GenerateConfig
from regen.storage import Store


def check_manifest(
    config: GenerateConfig, path: Path, resolved: dict[str, Any], input_fp: InputFingerprint
) -> dict[str, Any]:
    """Refuse silent changes against an earlier session; record this one."""
    work = config.input
    try:
        return check_and_record(
            path,
            config=resolved,
            input_fp=input_fp,
            allow_changed_input=work.allow_changed_input,
            allow_changed_sampling=work.allow_changed_sampling,
            command=config.command,
        )
    except OSError as exc:
        raise OutputError.writing(path.parent, exc) from exc


def scan_ledger(
    config: GenerateConfig,
    store: Store,
    input_fp: InputFingerprint,
    manifest: dict[str, Any],
    on_event: Callable[[str], None],
    on_fail: Callable[[RegenError], None],
) -> ledger_mod.Ledger:
    if config.input.retry_errors:
        moved = store.set_errors_aside()
        if moved:
            on_event(f"--retry-errors: {moved} error shard(s) set aside for retrying")
    # Records read from this input, or from an earlier one this one only appends to,
    # name their input lines truly: a resume may skip those lines unread.
    prompts = config.input.prompts
    same_lines = {input_fp.xxh3_128} | same_lines_inputs(prompts, manifest["earlier_inputs"])
    ledger = ledger_mod.scan(
        store.layout,
        compress=config.output.compress,
        remote=store.committed(),
        part=config.part,
        input_digests=same_lines,
    )
    store.start(on_event, on_fail)
    for note in ledger.repaired:
        on_event(f"repaired {note}")
    if ledger.completions + ledger.errors and not ledger.lines.trusted:
        on_event(f"this resume reads every input line: {ledger.lines.why_not}")
    return ledger
