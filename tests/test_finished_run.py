"""The finished-run library (regen.finished): one opener for every verb that reads a run."""

from __future__ import annotations

import pytest

from regen.errors import ConfigError
from regen.finished.read import Unreadable, open_run, parse_line, read_runs
from regen.finished.record import Completion
from regen.score.engine import engine_report
from regen.score.rows import Selection


def test_a_folder_without_completions_is_refused_with_one_message_by_every_reader(tmp_path):
    """check and export read through read_runs; score opens the run itself: the same words."""
    every_row = Selection("category", None, 0)
    refusals = []
    for read in (
        open_run,
        lambda d: list(read_runs([d])),
        lambda d: engine_report(d, every_row, tmp_path / "score"),
    ):
        with pytest.raises(ConfigError) as err:
            read(tmp_path)
        refusals.append((err.value.message, err.value.hint))
    assert (
        refusals
        == [
            (
                f"no completion shards under {tmp_path}/completions",
                "pass the --output-dir of a `regen generate` run",
            )
        ]
        * 3
    )


def test_a_line_is_a_completion_or_says_why_not():
    line = (
        b'{"id": "p1", "sample": 0, "messages": [{"role": "user", "content": "hi"}, '
        b'{"role": "assistant", "content": "yo"}]}'
    )
    assert isinstance(parse_line(line), Completion)
    bad = parse_line(b"{not json")
    assert isinstance(bad, Unreadable) and bad.kind == "bad_json" and bad.raw == {}
