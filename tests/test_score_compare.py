"""`score --draft ours --draft reference --compare`: the paired difference per group, depth and
position in the answer, each interval drawn again here by hand from the rows (numpy), and the
verb end to end on the embedded model."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from regen.cli import main
from regen.score.accept import Z95, simulate
from regen.score.gap import against, reference_rows


def rows_file(path: Path, matches: dict[str, tuple[str, str]]) -> Path:
    lines = [
        {"id": rid, "sample": 0, "groups": {"category": cat}, "match": m}
        for rid, (cat, m) in matches.items()
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def draw(rng: random.Random, n: int, rate: float) -> str:
    return "".join("1" if rng.random() < rate else "0" for _ in range(n))


def by_hand(ref: list[tuple[float, float]], ours: list[tuple[float, float]]) -> tuple:
    """Ratio of sums on each side, and the 95% interval of the difference from each row's
    linearised share (the delta method), written out with numpy."""
    r, o = np.array(ref), np.array(ours)
    before, after = r[:, 0].sum() / r[:, 1].sum(), o[:, 0].sum() / o[:, 1].sum()
    share = (o[:, 0] - after * o[:, 1]) / o[:, 1].mean() - (r[:, 0] - before * r[:, 1]) / r[
        :, 1
    ].mean()
    return after - before, Z95 * share.std(ddof=1) / np.sqrt(len(share))


def test_paired_interval_depth_and_position_equal_the_hand_computation(tmp_path):
    rng = random.Random(7)
    ref, ours = {}, {}
    for i in range(40):
        cat = "code" if i % 2 else "chat"
        base = draw(rng, 600, 0.5)
        lift = 0.3 if cat == "code" else 0.0
        better = "".join("1" if c == "0" and rng.random() < lift else c for c in base)
        ref[f"r{i}"], ours[f"r{i}"] = (cat, base), (cat, better)
    ref_file = rows_file(tmp_path / "ref.jsonl", ref)
    ours_file = rows_file(tmp_path / "ours.jsonl", ours)
    result = against(ours_file, reference_rows(ref_file), "reference", "category", [3])
    for group in ("chat", "code", "(overall)"):
        ids = [r for r in ref if group == "(overall)" or ref[r][0] == group]
        steps = [(simulate(ref[r][1], 3), simulate(ours[r][1], 3)) for r in ids]
        diff, half = by_hand(
            [(s.tokens, s.steps) for s, _ in steps], [(s.tokens, s.steps) for _, s in steps]
        )
        got = result["groups"][group]["3"]
        assert got["rows"] == len(ids)
        assert got["difference"] == pytest.approx(diff, abs=1e-4)
        assert got["ci95_half_width"] == pytest.approx(half, abs=1e-4)
    assert result["groups"]["chat"]["3"]["difference"] == 0.0  # the same matches
    assert (
        result["groups"]["code"]["3"]["difference"]
        > 3 * result["groups"]["code"]["3"]["ci95_half_width"]
    )
    # depth j: accepted at j over reached j, from the steps' runs
    for j in (1, 2, 3):
        cells = []
        for r in ref:
            a, b = simulate(ref[r][1], 3).runs, simulate(ours[r][1], 3).runs
            cells.append(((sum(a[j:]), sum(a[j - 1 :])), (sum(b[j:]), sum(b[j - 1 :]))))
        diff, half = by_hand([c for c, _ in cells], [c for _, c in cells])
        got = result["depth"][str(j)]
        assert got["difference"] == pytest.approx(diff, abs=1e-4), j
        assert got["ci95_half_width"] == pytest.approx(half, abs=1e-4), j
    # position: top-1 by where the token sits in the answer
    assert list(result["position"]) == ["0-127", "128-511", "512-2047"]
    for label, lo, hi in (("0-127", 0, 128), ("128-511", 128, 512), ("512-2047", 512, 600)):
        cells = [
            ((ref[r][1][lo:hi].count("1"), hi - lo), (ours[r][1][lo:hi].count("1"), hi - lo))
            for r in ref
        ]
        diff, half = by_hand([c for c, _ in cells], [c for _, c in cells])
        got = result["position"][label]
        assert got["difference"] == pytest.approx(diff, abs=1e-4), label
        assert got["ci95_half_width"] == pytest.approx(half, abs=1e-4), label
    assert result["where"]["group"]["at"] == "code"


@pytest.mark.model
def test_score_compare_prints_ours_against_the_reference(run):
    """On a copy of the session's greedy run (model_run_fixtures), not one built again."""
    args = ["score", str(run), "--tokenizer", "embedded", "--all", "--k", "3"]
    result = CliRunner().invoke(
        main, [*args, "--draft", "embedded", "--draft", "ngram", "--compare", "--threads", "1"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((run / "score" / "score.json").read_text())
    ours, ref = report["drafts"][0], report["drafts"][1]
    name = ours["name"]  # the embedded GGUF's name
    assert f"{name} against ngram (paired by row; difference = {name} - ngram)" in result.output
    assert "widest gap: group math" in result.output and "by depth, at k = 3" in result.output
    assert "compared" not in ref  # the reference is not compared with itself
    overall = ours["compared"]["groups"]["(overall)"]["3"]
    tau = {d["name"]: d["groups"]["(overall)"]["by_k"][0]["tau"]["value"] for d in (ours, ref)}
    assert overall["rows"] == 6
    assert overall["difference"] == pytest.approx(tau[name] - tau["ngram"], abs=1e-3)
    alone = CliRunner().invoke(main, [*args, "--draft", "ngram", "--compare"])
    assert alone.exit_code == 2 and "--compare needs two drafts" in alone.output
