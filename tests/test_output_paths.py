"""Every path a verb writes takes a bucket URL or refuses it: a scan of every verb's options
(an option that writes is declared an `OutputPath`, so it goes through a Destination or the
run's Store), and each verb's outputs written to moto's S3 on loopback, landing in the
bucket, never in a local folder named `s3:`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import boto3
import click
import orjson
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from gen_helpers import run, write_prompts
from regen.cli import VERBS, main
from regen.cli.paths import InputPath, OutputPath

BUCKET = "out"

# A value that names a place: by the last word of its name, or by its metavar.
PLACE = re.compile(
    r"(^|_)(dir|dirs|path|file|out|output|report|json|html|per_sample|fleet|run|prompts|"
    r"recipe|into|to|baseline|directory|sources)$"
)
PLACE_METAVAR = re.compile(r"FILE|DIR|RUN|\.json|GGUF|RECIPE")
# Places read as the user gave them (a path or a URL, opened by the library that reads
# them): never written. A new one must be added here on purpose.
READ_AS_GIVEN = {
    ("prepare", "sources"),
    ("plan", "prompts"),
    ("generate", "prompts"),
    ("status", "output_dir"),
    ("check", "output_dirs"),
    ("export", "output_dirs"),
}


def undeclared_places(commands: dict[str, click.Command]) -> list[str]:
    """Parameters that name a place without saying whether they write there: a bare
    click.Path or click.File (it folds s3://b into s3:/b and writes a local folder `s3:`), or
    an option named like a place that is neither an OutputPath (written through a Destination
    or the run's Store; a bucket URL taken, or refused with the reason) nor an InputPath."""
    found = []
    for verb, command in commands.items():
        for param in command.params:
            if type(param.type) in (click.Path, click.File):
                found.append(f"{verb} {param.name} (a bare {type(param.type).__name__})")
                continue
            if not isinstance(param.type, click.types.StringParamType | OutputPath | InputPath):
                continue  # a number, a choice, a flag: not a place
            place = PLACE.search(param.name or "") or PLACE_METAVAR.search(param.metavar or "")
            declared = isinstance(param.type, OutputPath | InputPath)
            if place and not declared and (verb, param.name) not in READ_AS_GIVEN:
                found.append(f"{verb} {param.name}")
    return found


def test_every_option_that_names_a_place_says_whether_it_writes_there():
    ctx = click.Context(main)
    verbs = {verb: main.get_command(ctx, verb) for verb in VERBS}
    assert undeclared_places(verbs) == [], "declare them with regen.cli.paths"


def test_the_scan_sees_a_new_option_that_writes_a_path():
    """What a newcomer would write is caught: a click.Path, or a plain --x-report."""

    @click.command()
    @click.option("--summary-json", type=click.Path())
    @click.option("--dump-report")
    @click.option("--out", "-o")
    @click.option("--keep", type=OutputPath("file"))
    def newcomer(**_) -> None: ...

    assert undeclared_places({"new": newcomer}) == [
        "new summary_json (a bare Path)",
        "new dump_report",
        "new out",
    ]


@pytest.fixture
def s3(s3_endpoint, monkeypatch, tmp_path):
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.create_bucket(Bucket=BUCKET)
    monkeypatch.chdir(tmp_path)  # a bug writing a local `s3:` folder would write it here
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return client


def objects(s3, prefix: str) -> dict[str, bytes]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {
        o["Key"].removeprefix(prefix): s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
        for o in listed
    }


@pytest.fixture
def finished(tmp_path, fake_server) -> Path:
    write_prompts(tmp_path / "p.jsonl", 6)
    assert run(tmp_path / "p.jsonl", tmp_path / "run", [fake_server().url]).exit_code == 0
    return tmp_path / "run"


def test_export_to_a_bucket_lands_in_the_bucket(tmp_path, finished, s3):
    url = f"s3://{BUCKET}/exports/sf"
    args = ["export", str(finished), "-o", url, "--format", "sharegpt"]
    report = f"s3://{BUCKET}/reports/export.json"
    done = CliRunner().invoke(main, [*args, "--report", report])
    assert done.exit_code == 0, done.output
    assert f"card: {url}/README.md" in done.output
    assert not (tmp_path / "s3:").exists()
    held = objects(s3, "exports/sf/")
    assert {"README.md", "regen.json", ".regen-export"} <= set(held)
    assert len(held["data/default/train-00000-of-00001.jsonl"].splitlines()) == 6
    for text in (held["regen.json"], held["README.md"]):  # names the bucket, not a temp dir
        assert b"regen-publish" not in text
    assert orjson.loads(held[".regen-export"])["out_dir"] == url
    assert orjson.loads(objects(s3, "reports/")["export.json"])["out_dir"] == url
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 2 and "already holds an export" in again.output
    replaced = CliRunner().invoke(main, [*args, "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    merged = CliRunner().invoke(main, [*args, "--merge-into", url])
    assert merged.exit_code == 0, merged.output


def test_check_writes_its_reports_to_the_bucket(tmp_path, finished, s3):
    names = {"--json": "r.json", "--html": "r.html", "--per-sample": "rows.jsonl"}
    reports = {flag: f"s3://{BUCKET}/check/{name}" for flag, name in names.items()}
    tokenizer = str(checkfix.qwen_style_dir())
    args = [a for pair in reports.items() for a in pair]
    done = CliRunner().invoke(main, ["check", str(finished), "--tokenizer", tokenizer, *args])
    assert done.exit_code in (0, 1), done.output  # a verdict, pass or fail
    held = objects(s3, "check/")
    assert orjson.loads(held["r.json"])["overall"]["samples"] == 6
    assert held["r.html"].startswith(b"<!DOCTYPE html>") or b"<html" in held["r.html"][:200]
    assert len(held["rows.jsonl"].splitlines()) == 6
    assert not (tmp_path / "s3:").exists()


def test_plan_keeps_its_calibration_run_in_the_bucket(tmp_path, fake_server, s3):
    write_prompts(tmp_path / "p.jsonl", 12)
    url = f"s3://{BUCKET}/runs/planned"
    done = CliRunner().invoke(
        main,
        [
            "plan",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "--servers",
            fake_server().url,
            "--sample",
            "4",
            "--concurrency",
            "2",
            "--output-dir",
            url,
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    assert orjson.loads(done.output)["calibration"]["kept_in"] == url
    held = objects(s3, "runs/planned/")
    assert "manifest.json" in held and any(k.startswith("completions/") for k in held)
    assert not (tmp_path / "s3:").exists()
    rest = CliRunner().invoke(main, ["plan", "--from-run", url, "--json"])  # read from there
    assert rest.exit_code == 0, rest.output
    assert orjson.loads(rest.output)["output_dir"] == url


def test_demo_writes_its_files_to_the_bucket(tmp_path, s3):
    done = CliRunner().invoke(main, ["demo", f"s3://{BUCKET}/demo"])
    assert done.exit_code == 0, done.output
    assert {"recipe.yaml", "prompts.jsonl"} <= set(objects(s3, "demo/"))
    assert f"regen prepare s3://{BUCKET}/demo/recipe.yaml" in done.output
    assert not (tmp_path / "s3:").exists()


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (
            ["serve", "--engine", "llamacpp", "--model", "m.gguf", "--fleet", "s3://b/f.json"],
            "--fleet",
        ),
        (
            [
                "generate",
                "--prompts",
                "p.jsonl",
                "--output-dir",
                "s3://b/run",
                "--staging-dir",
                "s3://b/staging",
            ],
            "--staging-dir",
        ),
    ],
)
def test_a_place_that_must_be_local_refuses_a_url_with_the_reason(tmp_path, args, option):
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 2, done.output
    assert option in done.output and "takes a path on this machine" in done.output
    assert not (tmp_path / "s3:").exists()
