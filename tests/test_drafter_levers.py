"""The lever matrix's own arithmetic (bench/drafter_*.py, issues 54 and 57): which sets a lever
trains, the paired difference and its verdict, the warnings below a size where a comparison
means nothing, the blend from what the drafter lacks, the held-out split, and where the bench
writes and what it installs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import drafter_blend as blend  # noqa: E402
import drafter_levers as levers  # noqa: E402
import drafter_pools as pools  # noqa: E402
import drafter_report as report  # noqa: E402
import drafter_rows as rows_of  # noqa: E402


def test_each_lever_trains_its_sets_and_the_default_first() -> None:
    assert levers.sets_of(["truncated"]) == ["default", "truncated-kept", "truncated-dropped"]
    assert levers.sets_of(["samples"]) == ["default", "t07", "two-samples"]
    matrix = levers.sets_of(["matrix"])
    assert "original" not in matrix and matrix[0] == "default"
    assert {"lacks", "hard-first", "mix", "select-keep-hardest-third"} <= set(matrix)
    assert levers.pools_of(["default", "mix"])[-1] == "held-t07"
    with pytest.raises(SystemExit, match="no such lever; use one or more of selection"):
        levers.sets_of(["thinking"])


def _rows(taus: list[float], group: str = "code") -> dict:
    """Rows as report.scored reads them: 20 tokens emitted each, steps from the row's tau."""
    return {(f"p{i}", 0): (group, 20, 20 / t) for i, t in enumerate(taus)}


def test_a_drafter_ahead_on_every_row_is_better_and_a_copy_is_not() -> None:
    base = _rows([1.2, 1.5, 1.1, 1.8, 1.3] * 8)
    ahead = _rows([t + 0.1 for t in [1.2, 1.5, 1.1, 1.8, 1.3] * 8])
    clear = report.paired_difference(ahead, base, None)
    assert clear["rows"] == 40 and 0 < clear["low"] <= clear["diff"] <= clear["high"]
    assert report.verdict([clear]) == "better"
    same = report.paired_difference(base, base, None)
    assert same["diff"] == same["low"] == same["high"] == 0
    assert report.verdict([same]) == "no clear difference"
    assert report.verdict([clear, same]) == "no clear difference"  # every seed must agree
    assert report.paired_difference(ahead, base, "math") == {"rows": 0}


def test_noise_between_rows_is_not_a_difference() -> None:
    """Two drafters that differ row by row but not on the whole: the interval spans 0."""
    a = _rows([1.0, 2.0] * 20)
    b = _rows([2.0, 1.0] * 20)
    d = report.paired_difference(a, b, None)
    assert d["diff"] == pytest.approx(0.0) and d["low"] < 0 < d["high"]


def test_figures_print_their_interval_rows_and_steps_and_small_sizes_are_flagged() -> None:
    groups = {
        g: {"rows": n, "tau": 1.5, "ci95": [1.4, 1.6], "verify_steps": 99, "top1": 0.3}
        for g, n in (("code", 6), ("math", 40), ("(overall)", 46))
    }
    training = {"rows": 120, "prompts": 60, "steps": 7, "passes": 1.25}
    vs = {"rows": 46, "diff": -0.012, "low": -0.05, "high": 0.03}
    entry = {"kind": "layer-skip", "set": "t07", "seed": 0, "baseline": "default"}
    text = report.table([entry | {"groups": groups, "training": training, "vs": vs}], 3)
    assert "| 120 / 60 | 7 | 1.2 |" in text  # rows / prompts, steps, passes
    assert "1.50 [1.40, 1.60]" in text and "| 99 |" in text
    assert "-0.01 [-0.05, +0.03] vs default" in text
    scored = entry | {"groups": groups, "training": training, "held": "held-t0"}
    said = report.warnings([scored, scored | {"seed": 1}])
    assert said[0].startswith("warning: held-t0: code 6 held-out rows (under 30 a domain)")
    assert "mean nothing" in said[0] and "math" not in said[0]  # said once for both drafters
    assert said[1].endswith("--budget): layer-skip t07 s0 (7), layer-skip t07 s1 (7)")
    enough = scored | {"groups": groups | {"code": groups["math"]}, "training": {"steps": 50}}
    assert report.warnings([enough]) == []


def test_the_blend_feeds_the_domains_still_learning() -> None:
    low = {"chat": 1.30, "code": 1.40, "math": 1.50}
    high = {"chat": 1.40, "code": 1.70, "math": 1.49}  # math flat: it keeps the floor
    shares = blend.weights(low, high)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["math"] == blend.FLOOR
    assert shares["code"] == pytest.approx(0.9 * 0.3 / 0.4)  # 3x chat's gain
    assert shares["chat"] == pytest.approx(0.9 * 0.1 / 0.4)
    flat = blend.weights(low, low)
    assert flat == pytest.approx(dict.fromkeys(low, 1 / 3))
    said = "\n".join(blend.recipe_comments(low, high, 3))
    assert "code: tau 1.400 -> 1.700, gain/doubling +0.300, share 0.68" in said


def test_the_blend_reads_its_weights_on_rows_that_did_not_train(tmp_path: Path) -> None:
    """A domain's tau(3) from a score rows file, leaving out the prompts that trained the
    drafter: the trained row (every draft accepted) would lift code above 1, its tau with
    every draft missed."""
    lines = [
        {"id": "seen", "groups": {"category": "code"}, "match": "1" * 12},
        {"id": "new", "groups": {"category": "code"}, "match": "0" * 12},
        {"id": "other", "groups": {"category": "chat"}, "match": "110" * 4},
        {"id": "skipped", "groups": {"category": "chat"}, "skipped": "empty", "message": ""},
    ]
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(line) + "\n" for line in lines))
    outside = blend.tau_outside(rows, {"seen"}, 3)
    assert outside["code"] == pytest.approx(1.0)
    assert outside["chat"] > 2.5  # two of every three drafts accepted
    assert blend.tau_outside(rows, set(), 3)["code"] > 1.5


def test_held_out_prompts_are_never_pool_prompts_whatever_the_order(tmp_path: Path) -> None:
    lines = [json.dumps({"messages": [{"role": "user", "content": f"q{i}"}]}) for i in range(30)]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("\n".join(lines) + "\n")
    b.write_text("\n".join(reversed(lines)) + "\n")
    held, pool = pools.split_lines(a, 5, 20, seed=1)
    assert len(held) == 5 and len(pool) == 20 and not set(held) & set(pool)
    assert pools.split_lines(b, 5, 20, seed=1) == (held, pool)
    assert pools.split_lines(a, 5, 20, seed=2)[0] != held
    with pytest.raises(SystemExit, match="30 prompts, the bench needs 5 held out and 30"):
        pools.split_lines(a, 5, 30, seed=1)


def test_rows_up_to_a_budget_and_what_a_set_is_made_of(tmp_path: Path) -> None:
    data = tmp_path / "export" / "data"
    for domain, n in (("code", 3), ("math", 2)):
        (data / domain).mkdir(parents=True)
        rows = [
            {
                "id": f"{domain}{i}",
                "sample": 0,
                "input_ids": [1, 2, 3, 4],
                "loss_mask": [0, 0, 1, 1],
            }
            for i in range(n)
        ]
        rows.append({"id": "empty", "sample": 0, "input_ids": [1, 2], "loss_mask": [1, 0]})
        (data / domain / "train-00000-of-00001.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows)
        )
    read = rows_of.read_export(tmp_path / "export")
    assert [r.id for r in read] == ["code0", "code1", "code2", "math0", "math1"]
    assert all(r.supervised == 2 for r in read)  # "empty": no loss after position 0
    assert [r.id for r in rows_of.up_to(read, 3)] == ["code0", "code1"]
    assert rows_of.describe(read) == {
        "rows": 5,
        "prompts": 5,
        "supervised_tokens": 10,
        "by_domain": {"code": 3, "math": 2},
    }


def test_the_other_models_wheel_is_an_install_step_never_a_pip_in_the_bench(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import subprocess

    monkeypatch.setattr(pools, "ORIGINAL_MODULE", "no_such_model_wheel_here")
    ran = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a))
    with pytest.raises(SystemExit, match=r"scripts/bootstrap.sh --dev"):
        pools.original_model()
    assert ran == []
    import tomllib

    project = tomllib.loads((BENCH.parent / "pyproject.toml").read_text())["project"]
    dev = project["optional-dependencies"]["dev"]
    assert any(dep.startswith(pools.ORIGINAL_PACKAGE) for dep in dev)


def test_the_results_land_in_the_bench_folder_with_verdicts_and_notes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import drafter_results as results

    monkeypatch.chdir(tmp_path)
    groups = {
        g: {"rows": 40, "tau": 1.5, "ci95": [1.4, 1.6], "verify_steps": 900, "top1": 0.3}
        for g in ("chat", "code", "math", "(overall)")
    }
    training = {"rows": 240, "prompts": 240, "steps": 60, "passes": 1.1}
    base = {"kind": "eagle3", "seed": 0, "held": "held-t0", "groups": groups}
    clear = {"rows": 120, "diff": 0.1, "low": 0.05, "high": 0.15}
    entries = [
        base | {"set": "default", "baseline": "default", "training": training, "vs": {}},
        base | {"set": "skewed", "baseline": "default", "training": training, "vs": clear},
        base
        | {"set": "skewed", "seed": 1, "baseline": "default", "training": training}
        | {"vs": clear | {"low": -0.01}},
    ]
    found = {
        "entries": entries,
        "verdicts": results.verdicts(entries),
        "notes": ["lacks-eagle3.yaml: # weights ..."],
        "not_run": {"thinking": "the target has no thinking mode"},
        "generate_seconds": {"pool-t0": 600.0},
        "wall_seconds": 1200.0,
        "load_average": [3.0, 4.5],
    }
    work = tmp_path / "bench" / "seed0"
    work.mkdir(parents=True)
    text = results.save(work, found, 3)
    assert json.loads((work / "result.json").read_text())["entries"] == entries
    assert (work / "table.md").read_text() == text + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench"]  # nothing in the current folder
    assert "| eagle3 | skewed | 1 | 240 / 240 | 60 | 1.1 |" in text
    assert "skewed vs default: no clear difference (s0 +0.10 [+0.05, +0.15]; s1 " in text
    assert "not run: the target has no thinking mode" in text
    assert "load average 3.0 at the start, 4.5 at the end" in text
