"""The line map a resume skips finished input lines by: its runs count what they skip, a
run across windows is one run, and reading with runs yields exactly the other lines
(plain, gzip and zstd, at any chunk size)."""

from __future__ import annotations

import gzip
import random

import numpy as np
import pytest
import zstandard

import regen.jsonio
import regen.run.intake
import regen.run.linemap
from regen.jsonio import iter_lines
from regen.run.linemap import NOTHING_LEFT, LineMap


def test_line_map_runs_count_what_they_skip():
    lines = LineMap()
    lines.add_samples(np.array([1, 2, 2, 3, 5, 5, 7, 7]))  # two samples per line
    lines.add_nothing_left(np.array([4, 8]))  # 4: ours, unusable; 8: another part's
    runs = list(lines.runs(2, unusable_lines={4}))
    assert [(r.first, r.last, r.finished, r.unusable) for r in runs] == [
        (2, 2, 1, 0),
        (4, 5, 1, 1),
        (7, 8, 1, 0),
    ]
    assert lines.finished_samples(1) == 1 and lines.finished_samples(4) == 0
    lines.add_samples(np.array([4]))
    assert not lines.trusted and "unusable and finished" in lines.why_not
    assert list(lines.runs(2, set())) == []


@pytest.mark.parametrize("packing", ["plain", "gzip", "zstd"])
@pytest.mark.parametrize("chunk", [1, 5, 64, 1 << 20])
def test_skipping_lines_yields_exactly_the_other_lines(tmp_path, monkeypatch, packing, chunk):
    monkeypatch.setattr(regen.jsonio, "CHUNK", chunk)
    rng = random.Random(chunk)
    for trial in range(40):
        rows = [b"x" * rng.randint(0, 30) if rng.random() > 0.1 else b"" for _ in range(50)]
        data = b"\n".join(rows) + (b"\n" if trial % 3 else b"")  # some end without a newline
        data = {"plain": data, "gzip": gzip.compress(data)}.get(packing) or (
            zstandard.ZstdCompressor().compress(data)
        )
        path = tmp_path / "f.jsonl"
        path.write_bytes(data)
        whole = list(iter_lines(path))
        runs, at = [], 1
        while at <= len(whole):
            first = at + rng.randint(0, 3)
            last = min(len(whole), first + rng.randint(0, 6))
            if first > len(whole):
                break
            runs.append((first, last))
            at = last + 2
        skipped = {n for first, last in runs for n in range(first, last + 1)}
        expected = [(n, line) for n, line in whole if n not in skipped]
        assert list(iter_lines(path, iter(runs))) == expected, (trial, runs)


@pytest.mark.parametrize("window", [1, 3, 64])
def test_line_map_runs_match_a_line_by_line_reading(monkeypatch, window):
    """Runs are worked out a window at a time; a run across windows is still one run."""
    monkeypatch.setattr(regen.run.linemap, "WINDOW", window)
    rng = random.Random(window)
    for trial in range(100):
        samples = rng.randint(1, 3)
        state = {}  # line -> finished samples, or NOTHING_LEFT
        for line in range(1, rng.randint(2, 80)):
            roll = rng.random()
            state[line] = (
                samples if roll < 0.5 else NOTHING_LEFT if roll < 0.6 else rng.randrange(samples)
            )
        lines = LineMap()
        for line, value in state.items():
            if value == NOTHING_LEFT:
                lines.add_nothing_left(np.array([line]))
            elif value:
                lines.add_samples(np.array([line] * value))
        bad = {n for n, v in state.items() if v == NOTHING_LEFT and rng.random() < 0.5}
        expected: list[list[int]] = []
        for n, value in state.items():
            if value not in (samples, NOTHING_LEFT):
                continue
            if expected and expected[-1][1] == n - 1:
                expected[-1][1] = n
            else:
                expected.append([n, n])
        want = [
            (a, b, sum(state[n] == samples for n in range(a, b + 1)), len(bad & {*range(a, b + 1)}))
            for a, b in expected
        ]
        got = [(r.first, r.last, r.finished, r.unusable) for r in lines.runs(samples, bad)]
        assert got == want, (trial, state)
