"""The seven-source blend that once went wrong four ways, run from local fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from regen.errors import ConfigError
from regen.prepare import load_recipe, prepare
from regen.prepare.recipe import parse_recipe

FIXTURES = Path(__file__).parent / "fixtures" / "prepare"
RECIPE = Path(__file__).parents[1] / "examples" / "recipe.yaml"


@pytest.fixture
def recipe_file(tmp_path: Path) -> Path:
    """The README's recipe, pointed at the test fixtures."""
    shutil.copytree(FIXTURES, tmp_path / "prepare")
    target = tmp_path / "recipe.yaml"
    target.write_text(RECIPE.read_text())
    return target


def run(recipe_file: Path, out: Path, **overrides) -> tuple[list[dict], dict, list[dict]]:
    recipe = load_recipe(str(recipe_file)).with_overrides(**overrides)
    prepare(recipe, out)
    lines = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    report = orjson.loads(out.with_suffix(".report.json").read_bytes())
    rejects = [orjson.loads(x) for x in out.with_suffix(".rejects.jsonl").read_bytes().splitlines()]
    return lines, report, rejects


def by_name(report: dict) -> dict[str, dict]:
    return {s["name"]: s for s in report["sources"]}


def test_exact_counts_per_source(recipe_file: Path, tmp_path: Path) -> None:
    lines, report, _ = run(recipe_file, tmp_path / "prompts.jsonl")
    s = by_name(report)
    expect = {  # read, converted, rejected, skipped, deduplicated, unique, selected
        "hermes_fc": (4, 3, 1, 0, 0, 3, 3),
        "agent": (5, 5, 0, 0, 0, 5, 5),
        "traces": (7, 3, 1, 3, 0, 3, 3),
        "infinity": (7, 6, 1, 0, 1, 5, 3),
        "metamath": (5, 4, 1, 0, 0, 4, 2),
        "codefeedback": (6, 5, 1, 0, 0, 5, 2),
        "webinstruct": (5, 5, 0, 0, 1, 4, 2),
    }
    for name, (read, conv, rej, skip, dup, uniq, sel) in expect.items():
        got = s[name]
        assert (got["read"], got["converted"], sum(got["rejected"].values())) == (read, conv, rej)
        assert (sum(got["skipped"].values()), got["deduplicated"]) == (skip, dup), name
        assert (got["unique"], got["selected"]) == (uniq, sel), name
        assert got["read"] == got["converted"] + rej + skip  # nothing vanishes
    assert len(lines) == report["written"] == 20
    assert report["composition"]["by_source"]["agent"]["count"] == 5


def test_dedup_across_sources_keeps_the_earlier(recipe_file: Path, tmp_path: Path) -> None:
    lines, report, _ = run(recipe_file, tmp_path / "prompts.jsonl")
    s = by_name(report)
    assert s["webinstruct"]["duplicate_of"] == {"infinity": 1}
    assert s["infinity"]["duplicate_of"] == {"infinity": 1}
    ids = [x["id"] for x in lines]
    assert len(ids) == len(set(ids))


def test_same_seed_same_bytes_other_seed_other_file(recipe_file: Path, tmp_path: Path) -> None:
    run(recipe_file, tmp_path / "a.jsonl")
    run(recipe_file, tmp_path / "b.jsonl")
    run(recipe_file, tmp_path / "c.jsonl", seed=8)
    a = (tmp_path / "a.jsonl").read_bytes()
    assert a == (tmp_path / "b.jsonl").read_bytes()
    assert a != (tmp_path / "c.jsonl").read_bytes()
    reports = [orjson.loads((tmp_path / f"{x}.report.json").read_bytes()) for x in "ab"]
    for r in reports:
        del r["output"], r["rejects"]
    assert reports[0] == reports[1]


def test_rejects_say_where_and_what_to_change(recipe_file: Path, tmp_path: Path) -> None:
    _, _, rejects = run(recipe_file, tmp_path / "prompts.jsonl")
    kinds = {(r["source"], r["kind"]) for r in rejects}
    assert ("infinity", "unknown_role") in kinds
    role = next(r for r in rejects if r["kind"] == "unknown_role")
    assert "'bot'" in role["reason"] and "--role-map bot=" in role["fix"]
    assert role["row"] == 4 and role["location"].endswith("infinity_instruct.jsonl:5")
    empty = next(r for r in rejects if r["source"] == "traces" and not r["skipped"])
    assert empty["kind"] == "empty_prompt" and "--keep-multimodal" in empty["fix"]
    skipped = sorted(r["kind"] for r in rejects if r["skipped"])
    assert skipped == ["prefix_of_later_request", "quota_probe", "token_count"]


def test_historical_failures_are_caught(recipe_file: Path, tmp_path: Path) -> None:
    lines, report, _ = run(recipe_file, tmp_path / "prompts.jsonl")
    s = by_name(report)
    # 1. Agent trajectories share their opening: a whole-prompt key keeps them all.
    assert s["agent"]["deduplicated"] == 0 and s["agent"]["selected"] == 5
    # 2. List content in traces is read; the dropped blocks are counted, not fatal.
    assert s["traces"]["converted"] == 3
    assert s["traces"]["dropped_blocks"] == {"image": 1, "thinking": 1}
    # 3. Function-calling tools come from the system prompt and the tools column.
    hermes = [x for x in lines if x["source"]["dataset"].endswith("hermes_function_calling.jsonl")]
    assert len(hermes) == 3 and all(x["tools"] for x in hermes)
    # 4. The composition is in the report, so a skew is visible before generation.
    shares = report["composition"]["by_category"]
    assert sum(v["count"] for v in shares.values()) == 20


def test_role_map_override_recovers_rejects(recipe_file: Path, tmp_path: Path) -> None:
    _, report, _ = run(recipe_file, tmp_path / "p.jsonl", role_map={"bot": "assistant"})
    assert by_name(report)["infinity"]["rejected"] == {}


def test_code_skew_is_a_loud_warning(tmp_path: Path) -> None:
    recipe = parse_recipe(
        {
            "sources": [
                {"path": "codefeedback.jsonl", "count": "all"},
                {"path": "webinstructsub.json", "count": 1},
            ]
        },
        base_dir=str(FIXTURES),
    )
    report = prepare(recipe, tmp_path / "p.jsonl")
    assert any("category 'code' is 83%" in w for w in report.warnings)


def test_high_dedup_rate_names_the_source(tmp_path: Path) -> None:
    rows = [{"query": "same question", "response": str(i)} for i in range(8)]
    rows += [{"query": f"question {i}", "response": "x"} for i in range(2)]
    (tmp_path / "dups.jsonl").write_bytes(b"\n".join(orjson.dumps(r) for r in rows))
    recipe = parse_recipe({"sources": [{"path": "dups.jsonl", "count": "all"}]}, str(tmp_path))
    report = prepare(recipe, tmp_path / "p.jsonl")
    assert report.data["sources"][0]["deduplicated"] == 7
    assert any("'dups' lost 70% of its prompts to dedup" in w for w in report.warnings)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"wieght": 1}, "unknown field 'wieght'"),
        ({"weight": -1}, "sources[0].weight: expected a positive number"),
        ({"count": "some"}, "sources[0].count: expected a whole number or 'all'"),
        ({"weight": 1, "count": 3}, "exactly one of 'weight' or 'count'"),
    ],
)
def test_recipe_errors_name_the_field(change: dict, message: str) -> None:
    source = {"path": "x.jsonl", **change}
    with pytest.raises(ConfigError) as err:
        parse_recipe({"total": 5, "sources": [source]})
    assert message in str(err.value) and err.value.hint


def test_missing_output_folders_are_created(recipe_file: Path, tmp_path: Path) -> None:
    output = tmp_path / "not" / "there" / "prompts.jsonl"
    prepare(load_recipe(str(recipe_file)), output)
    assert output.read_bytes().count(b"\n") == 20
    assert output.with_suffix(".rejects.jsonl").exists()
    assert output.with_suffix(".report.json").exists()


@pytest.mark.model
def test_prompt_lengths_in_tokens_with_the_target_tokenizer(recipe_file: Path, tmp_path: Path):
    _, report, _ = run(recipe_file, tmp_path / "p.jsonl", tokenizer="embedded")
    lengths = report["prompt_tokens"]
    assert lengths["count"] == 20
    assert 0 < lengths["min"] <= lengths["p50"] <= lengths["p90"] <= lengths["max"]
