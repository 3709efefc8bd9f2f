"""Short hands for the live-concurrency tests: a full window, driving `decide` along an
engine's output curve, a curve with a knee, and `generate` on one fake vLLM engine."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from gen_helpers import assert_exactly_once, run, write_prompts
from regen.fleet.control.concurrency import Level, Window, decide
from regen.testing.fake_engine import EngineCurve
from regen.testing.fake_server import Behaviour, echo_answer


def full(rate: float, **kw) -> Window:
    """A full window; 32 requests ended in it unless `requests` says otherwise."""
    return Window(seconds=1.0, tokens=rate, busy=1.0, **{"requests": 32, **kw})


def drive(curve, level: Level, windows: int = 60) -> Level:
    """Feed `decide` the windows a server with output rate `curve(n)` would give."""
    return run_curve(curve, level, windows)[-1][0]


def run_curve(curve, level: Level, windows: int) -> list[tuple[Level, float]]:
    history = []
    for _ in range(windows):
        rate, extra = curve(level.limit)
        history.append((level, rate))
        level = decide(level, full(rate, **extra))
    return history


def knee_at(knee: int, per: float = 10.0):
    """Linear up to `knee`, flat beyond it with a queue (max running requests)."""
    return lambda n: (per * min(n, knee), {"waiting": max(0, n - knee), "running": min(n, knee)})


def live_run(tmp_path, fake_server, curve: EngineCurve, tokens: int, count: int, **overrides):
    """`generate` with live concurrency (unless `overrides` say otherwise) on one fake vLLM
    engine whose answers are `tokens` long; every prompt answered exactly once."""
    behaviour = Behaviour(
        dialect="vllm", engine=curve, answer=lambda b: {**echo_answer(b), "tokens": tokens}
    )
    server = fake_server(behaviour)
    prompts, out = tmp_path / "prompts.jsonl", tmp_path / "out"
    ids = write_prompts(prompts, count)
    with level_log(tmp_path / "levels.log"):
        run(prompts, out, [server.url], **({"concurrency": None} | overrides))
    assert_exactly_once(out, ids)
    return server, out


@contextlib.contextmanager
def level_log(path: Path) -> Iterator[None]:
    """Every window's verdict (the controller's debug lines) into `path`, read back by
    `levels_told` when a test fails: a level that ended wrong says how it got there."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(relativeCreated)8.0f ms %(message)s"))
    logger = logging.getLogger("regen.fleet")
    before = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)
        handler.close()


def levels_told(tmp_path: Path, lines: int = 40) -> str:
    """The last `lines` of a live run's level log (`level_log`)."""
    return "\n".join((tmp_path / "levels.log").read_text().splitlines()[-lines:])
