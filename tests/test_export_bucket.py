"""An export to a bucket (moto's S3 on loopback): what it prints to train with works as
printed, and the local folder it is built in goes where `--staging-dir` says."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from gen_helpers import run, write_prompts
from regen.cli import main

BUCKET = "exports"


@pytest.fixture
def finished(tmp_path, fake_server) -> Path:
    write_prompts(tmp_path / "p.jsonl", 6)
    assert run(tmp_path / "p.jsonl", tmp_path / "run", [fake_server().url]).exit_code == 0
    return tmp_path / "run"


@pytest.fixture
def s3(s3_endpoint, tmp_path, monkeypatch):
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=BUCKET)
    monkeypatch.chdir(tmp_path)
    return s3_endpoint


def export(*args: str) -> str:
    done = CliRunner().invoke(main, ["export", *args])
    assert done.exit_code == 0, done.output
    return done.output


def python(code: str, cwd: Path, **env: str) -> str:
    """A fresh Python, as a user runs it: AWS_ENDPOINT_URL only when the test passes it, and
    `datasets` free to reach the bucket (the suite holds it offline for the Hub)."""
    gone = ("AWS_ENDPOINT_URL", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
    clean = {k: v for k, v in os.environ.items() if k not in gone}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        env=clean | env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_printed_datasets_call_loads_the_bucket_export(tmp_path, finished, s3):
    url = f"s3://{BUCKET}/tok"
    out = export(
        str(finished),
        "-o",
        url,
        "--format",
        "tokenized",
        "--val-fraction",
        "0.3",
        "--tokenizer",
        str(checkfix.qwen_style_dir()),
    )
    call = re.search(r"train with: (datasets\.load_dataset\(.*?\)) gives", out)
    assert call, out
    assert f'"{s3}"' in call.group(1)  # the endpoint, as storage options; no credential
    assert "testing" not in out
    loaded = python(
        f"import datasets, json; ds = {call.group(1)}; "
        "print(json.dumps({k: v.num_rows for k, v in ds.items()}))",
        tmp_path,
        HF_DATASETS_CACHE=str(tmp_path / "hf"),
    )
    counts = json.loads(loaded)
    assert sum(counts.values()) == 6 and set(counts) <= {"train", "validation"}


def test_under_hf_hub_offline_the_line_says_how_datasets_reads_the_bucket(tmp_path, finished, s3):
    """The suite runs with HF_HUB_OFFLINE=1, as a cluster without the Hub does: the printed
    call then fails as printed (datasets reads no remote file offline), and the line says
    what makes it work, HF_DATASETS_OFFLINE=0, which keeps the Hub offline."""
    tokenizer = ["--format", "tokenized", "--tokenizer", str(checkfix.qwen_style_dir())]
    out = export(str(finished), "-o", f"s3://{BUCKET}/off", *tokenizer)
    call = re.search(r"train with: (datasets\.load_dataset\(.*?\)) gives", out)
    assert call, out
    call = call.group(1)
    assert "HF_HUB_OFFLINE is set here" in out and "HF_DATASETS_OFFLINE=0" in out
    code = f"import datasets; ds = {call}; print(sum(v.num_rows for v in ds.values()))"
    cache = str(tmp_path / "hf")
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": cache, "AWS_ENDPOINT_URL": s3}
    with pytest.raises(AssertionError, match="Offline mode is enabled"):
        python(code, tmp_path, **offline)
    assert python(code, tmp_path, **offline, HF_DATASETS_OFFLINE="0").split()[-1] == "6"


def test_a_bucket_export_for_specforge_says_how_to_copy_it_first(tmp_path, finished, s3):
    from specforge.data.prompt_builder import prepare_prompt_tasks

    url = f"s3://{BUCKET}/runs/sf"
    out = export(
        str(finished),
        "-o",
        url,
        "--format",
        "specforge-tokenized",
        "--tokenizer",
        str(checkfix.qwen_style_dir()),
    )
    assert "data.prompts_path=s3://" not in out
    copy = re.search(r"^  (python -c .*)$", out, re.M)
    assert copy, out
    where = tmp_path / "elsewhere"
    where.mkdir()
    for _ in range(2):  # run again, the same files: no folder nested in the copy
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the venv's
        subprocess.run(
            copy.group(1),
            shell=True,
            cwd=where,
            check=True,
            timeout=180,
            env={**os.environ, "PATH": path},
        )
    prompts = re.search(r"data\.prompts_path=(\S+?);", out).group(1)
    assert not Path(prompts).is_absolute()
    tasks = prepare_prompt_tasks(
        where / prompts,
        None,
        chat_template=None,
        max_length=4096,
        is_preformatted=False,
        train_only_last_turn=False,
        cache_dir=None,
        cache_key=None,
        num_proc=1,
    )
    assert len(tasks) == 6
    assert sorted(p.name for p in (where / "sf").iterdir()) == [
        ".regen-export",
        "README.md",
        "data",
        "regen.json",
    ]


def test_a_bucket_export_is_built_under_the_staging_dir_and_removed(
    tmp_path, finished, s3, monkeypatch
):
    """Every file uploaded was read from under --staging-dir; nothing is left there."""
    from regen.storage.bucket import Bucket

    uploaded: list[Path] = []
    put_file = Bucket.put_file

    def seen(self, local: Path, name: str) -> None:
        uploaded.append(Path(local))
        put_file(self, local, name)

    monkeypatch.setattr(Bucket, "put_file", seen)
    staging = tmp_path / "big-disk" / "staging"
    export(str(finished), "-o", f"s3://{BUCKET}/sf", "--staging-dir", str(staging))
    assert len(uploaded) >= 4  # data, card, regen.json, marker
    assert all(staging in p.parents for p in uploaded), uploaded
    assert staging.is_dir() and not any(staging.iterdir())
