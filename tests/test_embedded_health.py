"""The embedded llama.cpp server on a loaded machine stays in rotation while it generates.

llama-cpp-python's server holds one lock for each generation, and /v1/models waits for it:
a health check there, behind two long answers on a busy CPU, timed out again and again, and
a server that was working took itself out of rotation ("stopped answering health checks",
then "every server is down" while it finished the answers nobody waited for any more)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gen_helpers import assert_exactly_once, run, write_prompts
from regen.fleet.dispatch import HealthPolicy
from regen.fleet.server import Timeouts
from regen.run.config import Sampling

pytestmark = pytest.mark.model


def busy_loops(n: int) -> list[subprocess.Popen]:
    """CPU load of another job on the machine: n processes spinning, stopped by their pid."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def test_a_loaded_embedded_server_is_not_taken_out_while_it_generates(tmp_path):
    ids = write_prompts(tmp_path / "p.jsonl", 4)
    # checked every 0.5 s, out after two 1 s misses in a row with no answer between: each
    # answer of 160 tokens takes longer than that here, and the second one waits its turn
    health = HealthPolicy(
        liveness_interval=0.5, liveness_timeout=1.0, liveness_failures=2, give_up_after=300
    )
    load = busy_loops(min(os.cpu_count() or 1, 4))
    try:
        result = run(
            tmp_path / "p.jsonl",
            tmp_path / "out",
            [],
            concurrency=2,
            health=health,
            timeouts=Timeouts(request=300, connect=5),
            sampling=Sampling(max_tokens=160, temperature=0.0),
        )
    finally:
        for proc in load:
            proc.kill()
            proc.wait(timeout=10)
    events = [str(e) for e in result.stats.events]
    assert not [e for e in events if "health checks" in e or "down" in e], events
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors and all(r["meta"]["attempts"] == 1 for r in completions)
