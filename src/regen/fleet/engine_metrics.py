"""An engine's own figures, read from its Prometheus /metrics: its load (what live concurrency
reads) and vLLM's speculative-decoding counters.

The names are the engines' (checked against vLLM 0.32's `v1/metrics/loggers.py` and
SGLang's `srt/metrics/collector.py`; counters are rendered with `_total`). Series of one
name are summed over their labels (one per engine core, or data-parallel rank).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# figure -> (vLLM name, SGLang name)
NAMES = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
    "preemptions": ("vllm:num_preemptions_total", "sglang:num_retracted_requests_total"),
    "generated": ("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
    "prefix_queries": ("vllm:prefix_cache_queries_total", None),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "sglang:cached_tokens_total"),
}


@dataclass(frozen=True, slots=True)
class EngineLoad:
    running: float | None = None
    waiting: float | None = None
    preemptions: float | None = None
    generated: float | None = None  # output tokens generated so far
    prefix_queries: float | None = None
    prefix_hits: float | None = None
    kv_tokens: int | None = None  # the KV cache's size in tokens, where stated


# vLLM states its cache as the labels of a gauge of 1 (VL:v1/metrics/loggers.py:1120);
# SGLang (older releases) as a gauge of its own.
_BLOCKS = re.compile(r'num_gpu_blocks="(\d+)"')
_BLOCK_SIZE = re.compile(r'block_size="(\d+)"')
SGLANG_KV = "sglang:max_total_num_tokens"


def parse(text: str) -> EngineLoad:
    """The figures regen uses, from Prometheus text; a figure the engine lacks is None."""
    sums: dict[str, float] = {}
    kv_tokens = None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("vllm:cache_config_info"):
            blocks, size = _BLOCKS.search(line), _BLOCK_SIZE.search(line)
            if blocks and size:
                kv_tokens = int(blocks.group(1)) * int(size.group(1))
            continue
        name, _, rest = line.partition("{") if "{" in line else line.partition(" ")
        value = rest.rsplit(" ", 1)[-1] if rest else ""
        try:
            sums[name.strip()] = sums.get(name.strip(), 0.0) + float(value)
        except ValueError:
            continue  # a line that is not a sample
    figures = {}
    for figure, names in NAMES.items():
        found = [sums[n] for n in names if n is not None and n in sums]
        figures[figure] = found[0] if found else None
    if kv_tokens is None and SGLANG_KV in sums:
        kv_tokens = int(sums[SGLANG_KV])
    return EngineLoad(**figures, kv_tokens=kv_tokens)


def spec_decode_counters(text: str) -> dict[str, float]:
    """vLLM's speculative-decoding counters (`vllm:spec_decode_num_drafts_total`, ...), summed
    over their engines and named as `score --from-engine`'s engine_counters name them:
    num_drafts, num_draft_tokens, num_accepted_tokens and accepted_at_<position>."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:spec_decode_num_") or "_total{" not in line:
            continue
        name = line.split("{", 1)[0].removeprefix("vllm:spec_decode_").removesuffix("_total")
        if 'position="' in line:
            name = "accepted_at_" + line.split('position="', 1)[1].split('"', 1)[0]
        out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out
