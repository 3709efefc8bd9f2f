"""Real vLLM servers for the whole test run (real_vllm_fleet.py: each fleet started once by
`regen serve`, as a user starts one, and stopped at the end as a user stops one), as the
session fixtures the tests ask for:

    real_vllm          the shared fleet: one replica, an API key (VLLM_API_KEY), chunked
                       prefill off as regen serves it on CPU, and n-gram speculative decoding
                       (SPEC: regen serve adds the per-request acceptance flag itself)
    real_vllm_pair     the shared fleet and one with chunked prefill on (the seeded crash)
    real_vllm_qwen3_style  a fleet with a Qwen3-style template that keeps the reasoning of
                       the current tool loop, and a reasoning parser that makes every answer
                       reasoning (both are server flags)
    real_vllm_fleets   the factory: `fleets.start("name", *engine_args)` for a fleet of one's
                       own; fleets started in the same test session share nothing

A start is one to two minutes of the suite's two cores, most of it one core's imports. So the
session fleets the collected tests will ask for start as warm-ups (tests/warmups.py) at the end
of collection, the pair first, and the modules that use a fleet run last: by then the fleets
answer, their starts overlapped by the tests before (conftest, `real_vllm_modules_last`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import warmups
from real_vllm_fleet import Fleets, RealFleet

K = 3  # draft tokens per step of the shared fleet's n-gram speculation
SPEC = {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": 3}
TEMPLATES = Path(__file__).parent / "fixtures" / "templates"
# The fleets the session fixtures serve, by name, with their engine arguments.
PAIR = {
    "shared": ("--speculative-config", json.dumps(SPEC)),
    "chunked": ("--enable-chunked-prefill", "--max-num-batched-tokens", "256"),
}
QWEN3_STYLE_ARGS = (
    "--chat-template",
    str(TEMPLATES / "qwen3_style.jinja"),
    "--reasoning-parser-plugin",
    str(TEMPLATES / "all_reasoning.py"),
    "--reasoning-parser",
    "all_reasoning",
)
QWEN3_STYLE = {"qwen3-style": QWEN3_STYLE_ARGS}
# The fixtures of the fleets (a module with a test on one runs last).
FLEET_FIXTURES = {"real_vllm", "real_vllm_pair", "real_vllm_qwen3_style", "real_vllm_fleets"}
SESSION_FLEETS = Fleets()  # the session fixtures' fleets, prelaunched or not


def fixtures_asked_for(items: list[pytest.Item]) -> set[str]:
    """The fixtures the items use, with the pair for those marked as asking at run time."""
    names = {name for item in items for name in item.fixturenames}
    marked = any(item.get_closest_marker("real_vllm") for item in items)
    return names | {"real_vllm_pair"} if marked else names


# The session fleets start as warm-ups (tests/warmups.py), the pair first.
warmups.register("real_vllm_pair", lambda env: SESSION_FLEETS.start_many(PAIR, env))
warmups.register(
    "real_vllm_qwen3_style", lambda env: SESSION_FLEETS.start_many(QWEN3_STYLE, env)["qwen3-style"]
)


def real_vllm_modules_last(items: list[pytest.Item]) -> None:
    """Reorder `items` in place: the modules with a test on a session fleet run last, in
    their order, so that their fleets started while the others ran. Whole modules move,
    so that no module's fixtures are set up twice."""
    late = {item.module for item in items if _uses_a_fleet(item)}
    items.sort(key=lambda item: item.module in late)


def _uses_a_fleet(item: pytest.Item) -> bool:
    marked = item.get_closest_marker("real_vllm") is not None
    return marked or bool(FLEET_FIXTURES & set(item.fixturenames))


@pytest.fixture(scope="session")
def real_vllm_fleets() -> Iterator[Fleets]:
    try:
        yield SESSION_FLEETS
    finally:
        SESSION_FLEETS.stop_all()


@pytest.fixture(scope="session")
def real_vllm_pair(real_vllm_fleets: Fleets) -> dict[str, RealFleet]:
    """The shared fleet and one with chunked prefill back on (the seeded crash)."""
    return warmups.result("real_vllm_pair")


@pytest.fixture(scope="session")
def real_vllm(real_vllm_pair: dict[str, RealFleet]) -> RealFleet:
    return real_vllm_pair["shared"]


@pytest.fixture(scope="session")
def real_vllm_qwen3_style(real_vllm_fleets: Fleets) -> RealFleet:
    return warmups.result("real_vllm_qwen3_style")
