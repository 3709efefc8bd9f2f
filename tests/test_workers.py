"""check and export spread over workers: the same rows, reports and bytes whatever their
number (one in this process, two local processes, two Ray actors), and only the order in
which rows were read decides what is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.check import Encoder, StatOptions, check_run
from regen.check.card import CardCheck
from regen.check.rules import parse_limits
from regen.check.work import check_lines
from regen.executors.pool import LocalWorkers, worker_context, workers_for
from regen.export import ExportRequest, Filters, export_run, make_format
from regen.parallel import InProcess

SUMMARY_PATHS = ("out_dir", "files")


def run_of(tmp_path: Path) -> Path:
    """Two shards of mixed samples: healthy, defective, unreadable, duplicate."""
    first = [*checkfix.healthy(30), {"id": "broken", "messages": []}]
    second = [
        *checkfix.healthy(20, "code"),
        checkfix.completion("empty", "", reasoning="", thinking="on"),
        checkfix.completion(
            "dup",
            "The capital of France is Paris; this is web answer 3 with more words.",
            thinking="on",
            reasoning="r",
        ),
        checkfix.completion("cut", "Half an answ", finish="length", category="math"),
    ]
    run = checkfix.write_run(tmp_path / "run", first)
    checkfix.write_run(run, second, shard="00001.jsonl")
    with open(run / "completions" / "00001.jsonl", "a") as fh:
        fh.write("{not json\n")
    return run


def files_of(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize(
    ("fmt", "file_type"),
    [("tokenized", "parquet"), ("specforge-tokenized", "jsonl"), ("specforge", "jsonl")],
)
def test_export_writes_the_same_bytes_with_one_or_two_workers(tmp_path, fmt, file_type):
    run = run_of(tmp_path)
    encoder = Encoder.of(checkfix.load("qwen"))
    outs, summaries = [], []
    for name, workers in (("one", InProcess()), ("two", LocalWorkers(2, small=1))):
        out = tmp_path / name
        request = ExportRequest(
            [run],
            out,
            make_format(fmt),
            encoder=encoder,
            filters=Filters(drop_truncated=True),
            eval_fraction=0.3,
            file_type=file_type,
            judge=CardCheck({}),
            count_tokens=True,
        )
        summary = export_run(request, workers=workers)
        outs.append(files_of(out / "data"))
        summaries.append({k: v for k, v in summary.to_json().items() if k not in SUMMARY_PATHS})
        assert summary.masked_tokens and summary.check is not None
    assert outs[0] == outs[1] and len(outs[0]) >= 2
    assert summaries[0] == summaries[1]
    assert summaries[0]["dropped"] == {"bad_messages": 1, "truncated": 1}
    assert summaries[0]["lines_not_json"]["count"] == 1  # the torn line: named, not a row


def test_check_reports_the_same_with_one_or_two_workers(tmp_path):
    run = run_of(tmp_path)
    encoder = Encoder.of(checkfix.load("qwen"))
    reports, per_samples = [], []
    for name, workers in (("one", InProcess()), ("two", LocalWorkers(2, small=1))):
        per_sample = tmp_path / f"{name}.jsonl"
        report = check_run(
            [run], encoder, StatOptions(), {}, show=3, per_sample=per_sample, workers=workers
        )
        reports.append(report.to_json())
        per_samples.append(per_sample.read_bytes())
        assert [(c.id, rule) for c, _, rule in report.shown][:1] == [("empty", "empty_answer")]
    assert reports[0] == reports[1] and per_samples[0] == per_samples[1]
    assert per_samples[0].count(b"\n") == 54  # every sample; the torn line is no sample


def test_workers_are_copies_of_this_process_unless_another_thread_runs(tmp_path):
    """No other Python thread: the workers are forks of this process (no second of imports
    each). With one (a bucket's I/O loop, say), forks of a clean server, and the same report."""
    alone = threading.active_count() == 1
    assert (worker_context(check_lines).get_start_method() == "fork") == alone
    run = run_of(tmp_path)
    encoder = Encoder.of(checkfix.load("qwen"))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        assert worker_context(check_lines).get_start_method() == "forkserver"
        served = check_run([run], encoder, StatOptions(), {}, workers=LocalWorkers(2, small=1))
    finally:
        stop.set()
        other.join(timeout=10)
    here = check_run([run], encoder, StatOptions(), {}, workers=InProcess())
    assert served.to_json() == here.to_json() and here.to_json()["overall"]["samples"] == 54


def test_workers_options_are_checked():
    assert isinstance(workers_for(1), InProcess)
    assert workers_for(3).count == 3
    with pytest.raises(Exception, match="--ray-address is for --executor ray"):
        workers_for(2, "local", "127.0.0.1:6379")


def test_more_local_workers_than_cores_are_held_to_the_cores(monkeypatch, capsys):
    """A typo of --workers 1000 would start 1000 copies of the tokenizer on two cores."""
    from regen.cli import worker_options

    monkeypatch.setattr(worker_options, "cores", lambda: 3)
    held = worker_options.workers_of({"workers": 1000, "executor": "local", "ray_address": None})
    assert held.count == 3
    assert "--workers 1000 is more than the 3 cores" in capsys.readouterr().err
    asked = worker_options.workers_of({"workers": 2, "executor": "local", "ray_address": None})
    assert asked.count == 2 and not capsys.readouterr().err
    ray = worker_options.workers_of({"workers": 8, "executor": "ray", "ray_address": None})
    assert ray.count == 8  # a cluster's actors are Ray's to place


def test_check_and_export_on_ray_actors_are_one_process(tmp_path):
    """Two Ray actors (a local cluster each command starts) give check's report and export's
    files as this process alone gives them."""
    run = run_of(tmp_path)
    tok = str(checkfix.qwen_style_dir())
    encoder = Encoder.of(checkfix.load("qwen"))
    here = check_run([run], encoder, StatOptions(), parse_limits(()), workers=InProcess())
    export_run(
        ExportRequest(
            [run],
            tmp_path / "here",
            make_format("tokenized"),
            encoder=encoder,
            filters=Filters(drop_truncated=True),
            eval_fraction=0.3,
            file_type="parquet",
            judge=CardCheck({}),
        ),
        workers=InProcess(),
    )
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths are long
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_USAGE_STATS_ENABLED": "0"}
    on_ray = ("--executor", "ray", "--workers", "2")
    try:
        report = tmp_path / "ray.json"
        done = regen_cli(env, "check", run, "--tokenizer", tok, "--json", report, *on_ray)
        assert done.returncode == 1, done.stdout + done.stderr[-3000:]  # the defects fail
        done = regen_cli(
            env,
            "export",
            run,
            "-o",
            tmp_path / "ray",
            "--format",
            "tokenized",
            "--tokenizer",
            tok,
            "--val-fraction",
            "0.3",
            "--drop-truncated",
            *on_ray,
        )
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert json.loads(report.read_text()) == here.to_json()
    exported = files_of(tmp_path / "here" / "data")
    assert files_of(tmp_path / "ray" / "data") == exported and len(exported) >= 2


def regen_cli(env: dict[str, str], *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "regen", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
