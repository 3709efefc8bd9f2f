"""Sources: Hugging Face `datasets` (offline, local files through the same loader), Parquet,
globs, and the CLI on top."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from regen.prepare import prepare
from regen.prepare.recipe import parse_recipe

FIXTURES = Path(__file__).parent / "fixtures" / "prepare"


def lines(path: Path) -> list[dict]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


@pytest.mark.parametrize("streaming", [True, False])
def test_hf_loader_matches_local_reader(tmp_path: Path, streaming: bool) -> None:
    data = str(FIXTURES / "infinity_instruct.jsonl")
    hf = {"hf": "json", "data_files": data, "streaming": streaming, "count": "all"}
    prepare(parse_recipe({"sources": [hf]}), tmp_path / "hf.jsonl")
    prepare(parse_recipe({"sources": [{"path": data, "count": "all"}]}), tmp_path / "local.jsonl")
    hf_lines, local_lines = lines(tmp_path / "hf.jsonl"), lines(tmp_path / "local.jsonl")
    assert [x["id"] for x in hf_lines] == [x["id"] for x in local_lines]
    assert hf_lines[0]["source"]["dataset"] == "json" and hf_lines[0]["source"]["split"] == "train"


def test_hf_save_to_disk(tmp_path: Path) -> None:
    import datasets

    records = lines(FIXTURES / "metamathqa.jsonl")
    datasets.Dataset.from_list(records).save_to_disk(str(tmp_path / "ds"))
    recipe = parse_recipe({"sources": [{"hf": str(tmp_path / "ds"), "count": "all"}]})
    report = prepare(recipe, tmp_path / "p.jsonl")
    assert report.data["sources"][0]["unique"] == 4


def test_parquet_and_glob(tmp_path: Path) -> None:
    records = lines(FIXTURES / "codefeedback.jsonl")
    for k in (0, 1):
        pq.write_table(
            pa.Table.from_pylist(records[k * 3 : k * 3 + 3]), tmp_path / f"cf-{k}.parquet"
        )
    recipe = parse_recipe({"sources": [{"path": "cf-*.parquet", "count": "all"}]}, str(tmp_path))
    report = prepare(recipe, tmp_path / "p.jsonl")
    s = report.data["sources"][0]
    assert (s["read"], s["unique"], s["rejected"]) == (6, 5, {"missing_field": 1})


def test_cli_quick_sources_and_errors(tmp_path: Path) -> None:
    from regen.cli import main

    out = tmp_path / "p.jsonl"
    runner = CliRunner()
    args = [
        "prepare",
        "-o",
        str(out),
        "--source",
        str(FIXTURES / "metamathqa.jsonl"),
        "--source",
        str(FIXTURES / "webinstructsub.json"),
        "--total",
        "6",
        "--seed",
        "3",
    ]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "wrote 6 prompts" in result.output and len(lines(out)) == 6
    bad = tmp_path / "bad.yaml"
    bad.write_text("sources:\n  - path: x.jsonl\n    wieght: 1\n")
    result = runner.invoke(main, ["prepare", str(bad), "-o", str(out)])
    assert result.exit_code == 2
    assert "unknown field 'wieght'" in result.output and "did you mean 'weight'" in result.output
