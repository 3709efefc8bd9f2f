"""The fake engine under load: a batching curve, KV preemption, a prefix cache, /metrics.

Rates are read on the engine's simulated clock (tokens per simulated second), so nothing
here depends on how fast this machine is."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from dataclasses import replace

import pytest

from regen.testing.fake_engine import UNMET, EngineCurve, FakeEngine
from regen.testing.fake_server import Behaviour

FAST = EngineCurve(time_scale=0.001)


async def _run(engine: FakeEngine, prompts: list[list[str]], wanted: int, at_once: int) -> None:
    queue = list(prompts)

    async def worker() -> None:
        while queue:
            await engine.generate(queue.pop(), wanted)

    await asyncio.gather(*(worker() for _ in range(at_once)))


def _rate(curve: EngineCurve, at_once: int, prompts: int = 64) -> tuple[float, FakeEngine]:
    engine = FakeEngine(curve)
    words = [[f"p{i}w{j}" for j in range(100)] for i in range(prompts)]
    asyncio.run(_run(engine, words, 50, at_once))
    return engine.counters.generation_tokens / engine.counters.clock, engine


def test_output_rate_rises_with_the_batch_then_flattens_at_max_running():
    curve = EngineCurve(time_scale=0.001, max_running=16)
    one, _ = _rate(curve, 1, prompts=8)
    eight, _ = _rate(curve, 8)
    sixteen, _ = _rate(curve, 16)
    sixty_four, engine = _rate(curve, 64)
    assert eight > 6 * one
    assert sixteen > 1.5 * eight
    assert sixty_four < 1.1 * sixteen  # the rest only wait
    assert engine.counters.preemptions == 0


def test_past_the_kv_cache_requests_are_preempted_and_output_falls():
    curve = EngineCurve(time_scale=0.001, kv_tokens=16 * 150, prefill_s=0.001)
    fits, _ = _rate(curve, 16)
    over, engine = _rate(curve, 64)
    assert engine.counters.preemptions > 0
    assert over < fits


def test_a_shared_prefix_is_prefilled_once_per_server():
    engine = FakeEngine(FAST)
    system = [f"sys{j}" for j in range(160)]
    prompts = [[*system, f"q{i}", "x"] for i in range(10)]
    asyncio.run(_run(engine, prompts, 5, 1))
    c = engine.counters
    assert c.prefix_queries == 10 * 162
    assert c.prefix_hits == 9 * 160  # every prompt after the first finds the system prompt
    assert c.prompt_tokens == 162 + 9 * 2


@pytest.mark.parametrize(
    ("dialect", "names"),
    [
        (
            "vllm",
            [
                "vllm:num_requests_running{",
                "vllm:num_requests_waiting{",
                "vllm:kv_cache_usage_perc{",
                "vllm:num_preemptions_total{",
                "vllm:prefix_cache_hits_total{",
                "vllm:prefix_cache_queries_total{",
                "vllm:generation_tokens_total{",
                'num_gpu_blocks="',
            ],
        ),
        (
            "sglang",
            [
                "sglang:num_running_reqs{",
                "sglang:num_queue_reqs{",
                "sglang:token_usage{",
                "sglang:num_retracted_requests_total{",
                "sglang:generation_tokens_total{",
            ],
        ),
    ],
)
def test_metrics_carry_the_engines_names(fake_server, dialect, names):
    server = fake_server(Behaviour(dialect=dialect, engine=FAST))
    with urllib.request.urlopen(server.url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for name in names:
        assert name in text


def test_sglang_states_its_limits_in_server_info(fake_server):
    curve = EngineCurve(max_running=48, kv_tokens=12345, time_scale=0.001)
    server = fake_server(Behaviour(dialect="sglang", engine=curve))
    with urllib.request.urlopen(server.url + "/get_server_info", timeout=5) as resp:
        info = resp.read().decode()
    assert '"max_running_requests":48' in info.replace(" ", "")
    assert '"max_total_num_tokens":12345' in info.replace(" ", "")


def test_the_unmet_engine_serves_no_metrics_and_falls_past_its_kv_cache(fake_server):
    """fake_engine.UNMET (issue 34): an engine regen has not met, whose load only its answers
    show; its output rises to about 256 in flight and falls past what its cache holds."""
    server = fake_server(Behaviour(engine=replace(UNMET, time_scale=0.001)))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(server.url + "/metrics", timeout=5)
    assert refused.value.code == 404

    def rate(at_once: int) -> float:  # of the benches' mix: 60 words, 400 +- 50% tokens
        engine = FakeEngine(replace(UNMET, time_scale=0.0))
        queue = [
            ([f"p{i}w{j}" for j in range(60)], 200 + (i * 7919) % 401) for i in range(6 * at_once)
        ]

        async def worker() -> None:
            while queue:
                await engine.generate(*queue.pop())

        async def run() -> None:
            await asyncio.gather(*(worker() for _ in range(at_once)))

        asyncio.run(run())
        return engine.counters.generation_tokens / engine.counters.clock

    below, knee, past = rate(128), rate(256), rate(400)
    assert knee > 1.05 * below and past < 0.9 * knee, (below, knee, past)
