"""The walkthrough as the docs show it, without running it: every command shown is replayed
or says why not, the README shows every step in order, only figures of the machine are
normalised, a periodic progress line may print any number of times, and no page names a
path of anyone's machine."""

from __future__ import annotations

import re

import pytest

from walkthrough_helpers import (
    NOT_REPLAYED,
    README,
    REPLAYED,
    ROOT,
    SHOWN_IN,
    assert_prints,
    readme_walkthrough,
)


@pytest.mark.parametrize("where", SHOWN_IN)
def test_every_walkthrough_command_is_replayed_or_says_why_not(where):
    commands = re.findall(r"^\$ (.*)$", SHOWN_IN[where](), re.M)
    assert commands
    for command in commands:
        assert command in REPLAYED or any(command.startswith(c) for c in NOT_REPLAYED), command


def test_the_readme_walkthrough_shows_every_step_but_the_fleet_in_order():
    commands = re.findall(r"^\$ (.*)$", readme_walkthrough(), re.M)
    assert commands == REPLAYED


@pytest.mark.parametrize(
    ("readme", "printed"),
    [
        (
            "[2026-11-30 13:21:30] 14/20 (70.0%) 0.50 compl/s 57 tok/s ETA 0m12s errors 0 servers"
            " 1/1 up, 2 in flight",
            "[2026-12-01 09:00:00] 9/20 (45.0%) 0.28 compl/s 9 tok/s ETA 1m36s errors 0 servers"
            " 1/1 up, 1 in flight",
        ),
        (
            "work/run: FINISHED (pid 27597 on vm; no process holds the run lock)",
            "work/run: FINISHED (pid 3 on gpu-node.lan; no process holds the run lock)",
        ),
        (
            "  http://127.0.0.1:34699: 20 done, 0 failed attempts, latency 2.6s",
            "  http://127.0.0.1:8080: 20 done, 0 failed attempts, latency 13.0s",
        ),
        (
            "end of batch: drain 1.8s, fleet idle 39% of it",
            "end of batch: drain 757ms, fleet idle 100% of it",
        ),
    ],
)
def test_only_figures_of_the_machine_are_normalised(readme, printed):
    assert_prints([readme], printed, "/x/work")
    for was, now in [("0 failed", "1 failed"), ("of it", ""), ("1/1 up", "0/1 up"), ("ED", "")]:
        if was in printed:
            changed = printed.replace(was, now)
            with pytest.raises(AssertionError):
                assert_prints([readme], changed, "/x/work")


def test_a_periodic_progress_line_may_print_any_number_of_times_but_nothing_else():
    readme = [
        "[2026-11-30 13:21:30] 8/20 (40.0%) 0.00 compl/s 0 tok/s ETA ? errors 0 servers 1/1 up,"
        " 0 in flight",
        "[2026-11-30 13:22:00] 19/20 (95.0%) 0.39 compl/s 39 tok/s ETA 0m02s errors 0 servers"
        " 1/1 up, 1 in flight",
        "done: 12 new completions, 0 errors; the run has 20 of 20 items, 0 left; output in"
        " work/run",
    ]
    start, periodic, end = readme
    slow = periodic.replace("19/20 (95.0%)", "8/20 (40.0%)").replace("ETA 0m02s", "ETA ?")
    for middle in ([], [periodic], [slow, periodic.replace("19/20", "15/20")]):
        assert_prints(readme, "\n".join([start, *middle, end]), "/x/work")
    for wrong in (
        periodic.replace("errors 0", "errors 2"),
        periodic.replace("1 in flight", "0 in flight"),
        "a line the README does not show",
    ):
        with pytest.raises(AssertionError):
            assert_prints(readme, "\n".join([start, wrong, end]), "/x/work")


@pytest.mark.parametrize("page", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=str)
def test_the_docs_name_no_path_of_anyones_machine(page):
    assert not re.search(r"/tmp/\w+/work|/work/(wt|main)|/home/(?!you/)\w+", page.read_text())
