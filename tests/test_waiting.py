"""The test suite's waiting helpers (tests/waiting.py) fail with what was awaited."""

from __future__ import annotations

import subprocess
import sys

import pytest

from waiting import kill_when, wait_until


def test_wait_until_returns_the_first_true_value():
    values = iter([0, None, "", 7])
    assert wait_until(lambda: next(values), 5, "a value", interval=0.01) == 7


def test_wait_until_names_what_and_the_last_value_on_timeout():
    with pytest.raises(AssertionError, match=r"no the answer within 0.2s \(last value: 0\)"):
        wait_until(lambda: 0, 0.2, "the answer")


def test_wait_until_stops_when_the_process_it_needs_ends():
    proc = subprocess.Popen(
        [sys.executable, "-c", "print('bye')"], stdout=subprocess.PIPE, text=True
    )
    proc.wait(timeout=30)
    with pytest.raises(AssertionError, match=r"exited with 0:\nbye\n before a file"):
        wait_until(lambda: False, 60, "a file", alive=proc)


def test_kill_when_kills_the_process_once_the_condition_holds(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        flag = tmp_path / "flag"
        flag.touch()
        kill_when(proc, flag.exists, 10, "the flag")
        assert proc.wait(timeout=10) == -9
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
