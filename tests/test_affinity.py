"""Cache-affine dispatch: which requests share a key, the load bound, and a run against fake
engines whose prefix caches count the hits (samples of one prompt; a shared system prompt)."""

from __future__ import annotations

import json

from gen_helpers import assert_exactly_once, run
from regen.fleet.control import affinity
from regen.testing.fake_engine import EngineCurve
from regen.testing.fake_server import Behaviour

SYSTEM = {"role": "system", "content": "You are a tool-using agent. " * 200}


def body(*messages, tools=None):
    return {"messages": list(messages), "tools": tools, "temperature": 0.7}


def test_samples_turns_and_a_shared_long_prefix_share_a_key_unrelated_prompts_do_not():
    user = {"role": "user", "content": "question 1"}
    first = affinity.prefix_key(body(user))
    assert affinity.prefix_key({**body(user), "seed": 5}) == first  # another sample
    turn_two = body(user, {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"})
    assert affinity.prefix_key(turn_two) == first  # a later turn of the conversation
    other = affinity.prefix_key(body({"role": "user", "content": "question 2"}))
    assert other != first
    shared = [
        affinity.prefix_key(body(SYSTEM, {"role": "user", "content": f"q{i}"})) for i in range(5)
    ]
    assert len(set(shared)) == 1  # past PREFIX_CHARS of the same system prompt


def test_a_hot_prefix_fills_its_server_only_up_to_the_bound():
    loads = {"a": 0.5, "b": 0.2, "c": 0.2}
    order = ["a", "b", "c"]
    assert affinity.choose(order, list(loads), loads.get) == "b"  # a is 0.3 over: spills
    loads["a"] = 0.4
    assert affinity.choose(order, list(loads), loads.get) == "a"  # within 0.25: stays


def _prefix_hits(tmp_path, fake_server, dispatch: str, prompts: list[dict], samples: int):
    curve = EngineCurve(time_scale=0.05, kv_tokens=200_000)
    servers = [fake_server(Behaviour(dialect="vllm", engine=curve)) for _ in range(3)]
    path = tmp_path / f"{dispatch}.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    out = tmp_path / f"out-{dispatch}"
    run(
        path,
        out,
        [s.url for s in servers],
        samples_per_prompt=samples,
        dispatch=dispatch,
        fixed_concurrency=True,
        concurrency=8,
    )
    assert_exactly_once(out, [p["id"] for p in prompts], samples)
    hits = sum(s.engine.counters.prefix_hits for s in servers)
    queries = sum(s.engine.counters.prefix_queries for s in servers)
    sends = [
        s["affinity_sends"] for s in json.loads((out / "progress.json").read_text())["servers"]
    ]
    return hits / queries, min(s.peak_in_flight for s in servers), sends


def test_affine_dispatch_finds_more_cached_prefixes_and_keeps_every_slot_busy(
    tmp_path, fake_server
):
    long = " ".join(f"w{j}" for j in range(300))
    prompts = [
        {"id": f"p{i}", "messages": [{"role": "user", "content": f"{i} {long}"}]}
        for i in range(100)
    ]
    spread, spread_peak, _ = _prefix_hits(tmp_path, fake_server, "least-loaded", prompts, 4)
    affine, affine_peak, sends = _prefix_hits(tmp_path, fake_server, "affine", prompts, 4)
    # Quiet, affine reads 0.62-0.65 and least-loaded 0.43-0.48; beside two CPU hogs 0.56-0.62
    # against 0.32-0.40. In CI's first minute, while the vLLM warm-ups load torch, servers
    # stall unevenly and affine spills more to keep every slot busy (its load bound): 0.53
    # against 0.46 was measured there. So: clearly above least-loaded, and above what
    # least-loaded reaches on a quiet machine.
    assert affine > spread + 0.04 and affine >= 0.5, (affine, spread)
    # Every server full: the engines' own count of requests at once reached the level. On a
    # loaded machine one request can end as the eighth arrives, so 7 is enough to see; a
    # dispatch that idled slots while requests waited leaves several empty.
    assert min(affine_peak, spread_peak) >= 7, (affine_peak, spread_peak)
    assert sum(sends) > 0
