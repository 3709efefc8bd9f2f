"""Small things a new user's second pass found: each message says what is true of what the
user typed and of what was written."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from click.testing import CliRunner

from gen_helpers import write_prompts
from regen.cli import main
from regen.demo import shipped_files

ROOT = Path(__file__).parents[1]


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_demo_names_every_file_and_folder_it_wrote(tmp_path):
    result = invoke("demo", str(tmp_path / "ex"))
    assert result.exit_code == 0, result.output
    tops = {name.split("/")[0] + ("/" if "/" in name else "") for name, _ in shipped_files()}
    assert "grafana-dashboard.json" in tops
    listed = result.output.splitlines()[0].split("(", 1)[1].rstrip(")").split(", ")
    assert (
        set(listed)
        == tops
        == {p.name + ("/" if p.is_dir() else "") for p in (tmp_path / "ex").iterdir()}
    )


def test_make_demo_says_its_one_error_is_on_purpose():
    makefile = (ROOT / "Makefile").read_text()
    demo = makefile.split("\ndemo:\n", 1)[1].split("\n\n", 1)[0]
    assert "one error is on purpose" in demo and "unknown role" in demo
    rows = [json.loads(line) for line in (ROOT / "examples" / "prompts.jsonl").open()]
    roles = {m["role"] for r in rows for m in r.get("messages", [])}
    assert roles - {"system", "user", "assistant"} == {"narrator"}
    assert rows[-1]["messages"][0]["role"] == "narrator"  # "the last line"


def test_plan_names_the_seed_of_its_sample_by_its_flag(tmp_path, fake_server):
    """`--seed 7` is the run's sampling seed; the sample's is --sample-seed (default 0)."""
    write_prompts(tmp_path / "p.jsonl", 6)
    result = invoke(
        "plan",
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "--servers",
        fake_server().url,
        "--sample",
        "2",
        "--seed",
        "7",
    )
    assert result.exit_code == 0, result.output
    assert "(--sample-seed 0)" in result.output and "(seed 0)" not in result.output


def test_status_help_names_no_option_status_does_not_take():
    text = invoke("status", "--help").output
    assert "--shard" not in text.replace("regen generate --shard", "")


def test_prepare_says_where_the_format_came_from(tmp_path):
    rows = [{"question": "q1", "answer": "a"}, {"question": "q2", "answer": "b"}]
    (tmp_path / "raw.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    given = invoke(
        "prepare",
        "--source",
        str(tmp_path / "raw.jsonl"),
        "--format",
        "pairs",
        "-o",
        str(tmp_path / "a.jsonl"),
    )
    assert given.exit_code == 0, given.output
    assert "format pairs (given with --format)" in given.output
    assert "set in the recipe" not in given.output
    recipe = tmp_path / "r.yaml"
    recipe.write_text("sources:\n  - path: raw.jsonl\n    format: pairs\n    count: all\n")
    in_recipe = invoke("prepare", str(recipe), "-o", str(tmp_path / "b.jsonl"))
    assert "format pairs (set in the recipe)" in in_recipe.output, in_recipe.output


def test_a_relative_prompt_path_is_found_from_another_directory(tmp_path, fake_server, monkeypatch):
    """The manifest names the prompt file so that `regen check` run elsewhere reads it."""
    from regen.check.composition import compare

    work = tmp_path / "work"
    work.mkdir()
    write_prompts(work / "p.jsonl", 3)
    monkeypatch.chdir(work)
    done = invoke(
        "generate",
        "--prompts",
        "p.jsonl",
        "-o",
        "run",
        "--servers",
        fake_server().url,
        "--display",
        "none",
    )
    assert done.exit_code == 0, done.output
    monkeypatch.chdir(tmp_path)
    manifest = json.loads((work / "run" / "manifest.json").read_text())
    assert manifest["input"]["path"] == str(work / "p.jsonl")
    comp = compare([work / "run"], {})
    assert comp.unavailable is None, comp.unavailable
    assert comp.prompt_files == [str(work / "p.jsonl")]


def test_every_category_of_a_blend_is_in_one_naming_scheme(tmp_path):
    """A dataset's own labels ("Finance") beside regen's (`tool_use`): one scheme, the one
    export names its per-domain configs by."""
    from regen.export.files import config_name

    fixtures = ROOT / "tests" / "fixtures" / "prepare"
    out = tmp_path / "p.jsonl"
    result = invoke(
        "prepare", "--source", str(fixtures / "hermes_function_calling.jsonl"), "-o", str(out)
    )
    assert result.exit_code == 0, result.output
    labels = {json.loads(line)["meta"]["category"] for line in out.read_text().splitlines()}
    assert "finance" in labels and "Finance" not in labels
    assert all(config_name(label) == label for label in labels), labels
