"""A stream that goes silent among a run's last requests is raced by a copy on an idle server
once it has been silent for a few of its read pauses: the run does not wait for
`--stall-timeout` to cut it (five minutes by default) and send it again. Real HTTP fake
servers; the answer written is the copy's, once."""

from __future__ import annotations

import time

import orjson
import pytest

from gen_helpers import assert_exactly_once, run, write_prompts
from regen.fleet.control.forecast import Forecast
from regen.fleet.server import Server
from regen.fleet.stream_progress import Progress
from regen.fleet.timeouts import Timeouts
from regen.testing.fake_server import Behaviour

STALL = 60.0  # --stall-timeout: the test fails if the run waits for it


@pytest.mark.parametrize(("before", "prompts"), [(14, 40), (19, 400)])
def test_a_stream_silent_at_the_end_is_answered_by_a_copy(tmp_path, fake_server, before, prompts):
    # The stalling server's 15th request (of about 20) stops halfway through its stream and
    # stays silent: sent among the last 16 items (two servers x 4 slots, two request times);
    # or its 20th of about 200 (sent well after the first answers came back, on a loaded
    # machine too; before the last items are handed out: slots.AFFINE_SCAN), long before the
    # last two request times, but within a stall timeout of the end, and still silent there.
    faults = ["ok"] * before + ["stall"] + ["ok"] * prompts
    assert _copies_won_in_time(tmp_path, fake_server, faults, prompts) == 1


def test_every_stream_silent_at_the_end_is_copied_past_the_copy_budget(tmp_path, fake_server):
    # Three of the stalling server's last requests stall: a copy of each is the retry its
    # stall timeout would send later, so the budget (1% of 40 answers: one copy) is not theirs.
    faults = ["ok"] * 14 + ["stall"] * 3 + ["ok"] * 99
    assert _copies_won_in_time(tmp_path, fake_server, faults, 40) == 3


def _copies_won_in_time(tmp_path, fake_server, faults: list[str], prompts: int) -> int:
    """`prompts` on two servers, the first with `faults`: each prompt answered once, in far
    less than STALL; the copies that won."""
    stalling = fake_server(Behaviour(slots=4, seconds_per_token=0.005, faults=faults))
    idle = fake_server(Behaviour(slots=4, seconds_per_token=0.005))
    ids = write_prompts(tmp_path / "p.jsonl", prompts)
    patient = Timeouts(request=600, connect=2, stall=STALL, stream=True)
    started = time.monotonic()
    result = run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        [stalling.url, idle.url],
        timeouts=patient,
        fixed_concurrency=True,
    )
    took = time.monotonic() - started
    assert result.exit_code == 0, result.message
    _, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors
    assert took < STALL / 2, f"the run waited {took:.0f}s: a silent stream was not copied"
    end_game = orjson.loads((tmp_path / "out" / "progress.json").read_bytes())["end_game"]
    return end_game["copies_won"]


def test_only_a_stream_that_went_quiet_after_its_first_tokens_is_taken_for_stalled():
    forecast = Forecast()
    for _ in range(8):
        forecast.answered({"usage": {"completion_tokens": 100}})
    server = Server("http://127.0.0.1:9", 4, timeouts=Timeouts(stall=STALL, stream=True))
    queued, talking, silent = Progress(), Progress(), Progress()
    talking.heard(10, now=29.0)
    silent.heard(10, now=0.0)
    # Waiting for its turn in the engine, or heard a second ago: read by its age and its
    # server's rate, which this server has not measured yet (no prediction, no copy).
    assert forecast.predict(server, queued, elapsed=30.0, faster=50.0, now=30.0) is None
    assert forecast.predict(server, talking, elapsed=30.0, faster=50.0, now=30.0) is None
    # Silent for 30 s: the stall timeout's other 30 s are left, then the whole answer again
    # (100 tokens at 50 tok/s), which a copy at 50 tok/s gives in 2 s.
    assert forecast.predict(server, silent, elapsed=30.0, faster=50.0, now=30.0) == (32.0, 2.0)
