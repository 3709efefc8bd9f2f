"""Warm-ups: the suite's slowest set-ups that need nothing from the tests before them (a
real vLLM fleet's start, the walkthrough's replay on the embedded model) run in one
background thread, one after the other, from the end of collection, while the other tests
run on the second core. The fixture that needs one waits for its result, or runs it there
and then when it was not started (a run that asks for the fixture only at run time) or is
still queued behind another job.

A job gets the environment as it was when collection ended: tests change os.environ with
monkeypatch while the job runs, and none of that may reach the servers it starts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

Job = Callable[[dict[str, str]], Any]

_JOBS: dict[str, Job] = {}  # fixture name -> its job, in the order registered (and run)
_STARTED: dict[str, Future] = {}
_ENVS: dict[str, dict[str, str]] = {}  # the environment each started job was given
_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warm-up")


def register(fixture: str, job: Job) -> None:
    """`job` makes what `fixture` returns; register at import, before collection ends."""
    _JOBS[fixture] = job


def start(fixtures: set[str]) -> None:
    """Queue the jobs of the fixtures the collected tests use, in the order registered."""
    env = dict(os.environ)
    for fixture, job in _JOBS.items():
        if fixture in fixtures and fixture not in _STARTED:
            _STARTED[fixture] = _POOL.submit(job, env)
            _ENVS[fixture] = env


def result(fixture: str) -> Any:
    """What the job made (its exception, raised here, if it failed). A job still queued
    behind others is taken off the queue and run here, at once: waiting for the jobs ahead
    (a vLLM fleet's start, minutes) would cost more than it saves."""
    future = _STARTED.get(fixture)
    if future is None:
        return _JOBS[fixture](dict(os.environ))
    if future.cancel():
        return _JOBS[fixture](_ENVS[fixture])
    return future.result()


def stop() -> None:
    """Jobs not begun are dropped; the one running is waited for (it stops what it starts)."""
    _POOL.shutdown(wait=True, cancel_futures=True)
