"""`--shard I/N`: N `regen generate` processes over one input and one output location do
disjoint parts, and their union is exactly once, even with kill -9 and restarts."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import assert_exactly_once, read_lines, run, write_prompts
from regen.cli import main
from regen.errors import ConfigError
from regen.format.part import Part, parse_part, part_from_env
from regen.run import parts_status as shard_status
from regen.testing.fake_server import Behaviour
from waiting import wait_until


def test_parts_are_disjoint_cover_everything_and_do_not_depend_on_order():
    ids = [f"id-{i}" for i in range(3000)]
    parts = [Part(i, 4) for i in range(4)]
    owners = [[p.index for p in parts if p.owns_id(i)] for i in ids]
    assert all(len(o) == 1 for o in owners)
    sizes = [sum(1 for o in owners if o == [k]) for k in range(4)]
    assert min(sizes) > 600  # roughly even
    assert [Part(2, 4).owns_id(i) for i in reversed(ids)] == [Part(2, 4).owns_id(i) for i in ids][
        ::-1
    ]


def test_part_from_slurm_and_kubernetes():
    assert part_from_env({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "8"}) == Part(3, 8)
    slurm_from_one = {
        "SLURM_ARRAY_TASK_ID": "8",
        "SLURM_ARRAY_TASK_COUNT": "8",
        "SLURM_ARRAY_TASK_MIN": "1",
    }
    assert part_from_env(slurm_from_one) == Part(7, 8)
    k8s = {"JOB_COMPLETION_INDEX": "2", "REGEN_SHARD_COUNT": "5"}
    assert part_from_env(k8s) == Part(2, 5)
    assert part_from_env({}) == Part(0, 1)
    with pytest.raises(ConfigError, match="REGEN_SHARD_COUNT"):
        part_from_env({"JOB_COMPLETION_INDEX": "2"})
    with pytest.raises(ConfigError, match=r"0\.\.N-1"):
        parse_part("4/4")
    with pytest.raises(ConfigError, match="3/8"):
        parse_part("three")


def test_a_slurm_array_with_a_step_numbers_its_parts_by_place_not_by_task_id():
    """`--array=0-15:4` runs tasks 0, 4, 8, 12: four parts, 0..3, every prompt in one."""
    tasks = [0, 4, 8, 12]
    parts = [
        part_from_env(
            {
                "SLURM_ARRAY_TASK_ID": str(task),
                "SLURM_ARRAY_TASK_COUNT": "4",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_MAX": "12",
                "SLURM_ARRAY_TASK_STEP": "4",
            }
        )
        for task in tasks
    ]
    assert parts == [Part(i, 4) for i in range(4)]
    assert "SLURM_ARRAY_TASK_STEP=4" in parts[1].origin
    ids = [f"p{i}" for i in range(500)]
    assert [sum(p.owns_id(i) for p in parts) for i in ids] == [1] * len(ids)
    from_one = {"SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "31"}
    stepped = {**from_one, "SLURM_ARRAY_TASK_STEP": "10", "SLURM_ARRAY_TASK_COUNT": "4"}
    assert part_from_env({**stepped, "SLURM_ARRAY_TASK_ID": "21"}) == Part(2, 4)
    # a list that is no range (--array=1,3,7): no task can tell its place; refused
    listed = {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "3"}
    listed |= {"SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "7"}
    with pytest.raises(ConfigError, match="evenly spaced") as err:
        part_from_env({**listed, "SLURM_ARRAY_TASK_STEP": "1"})
    assert "SLURM_ARRAY_TASK_MAX=7" in err.value.message and "--shard" in err.value.hint


def shard_command(prompts: Path, out: Path, url: str, part: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(prompts),
        "--output-dir",
        str(out),
        "--servers",
        url,
        "--concurrency",
        "4",
        "--display",
        "none",
        "--shard",
        part,
    ]


def test_three_shards_with_kills_are_exactly_once_over_the_union(tmp_path, fake_server):
    server = fake_server(Behaviour(slots=12, seconds_per_token=0.04))  # a part takes ~6 s
    n = 240
    ids = write_prompts(tmp_path / "p.jsonl", n)
    out = tmp_path / "out"
    rng = random.Random(9)
    kills = 0
    for _ in range(2):  # two rounds: all three start, two of them are killed midway
        procs = [
            subprocess.Popen(
                shard_command(tmp_path / "p.jsonl", out, server.url, f"{i}/3"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for i in range(3)
        ]
        try:
            time.sleep(rng.uniform(1.5, 2.5))  # kills at a random moment are the test
            for proc in procs[:2]:
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)
                    kills += 1
        finally:
            for proc in procs:
                _, err = proc.communicate(timeout=120)
                assert proc.returncode in (0, -signal.SIGKILL), err
    server.behaviour.seconds_per_token = 0.002  # slow for the kills to land mid-run; no more
    finals = [  # the last round: all three at once, as shards run, none killed
        subprocess.Popen(
            shard_command(tmp_path / "p.jsonl", out, server.url, f"{i}/3"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    try:
        for proc in finals:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
    finally:
        for proc in finals:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=30)
    assert kills >= 2
    completions, _ = assert_exactly_once(out, ids)
    assert len(completions) == n
    # Each part was asked only for its own prompts (plus what was in flight at a kill).
    assert len(server.requests) <= n + kills * 4
    status = CliRunner().invoke(main, ["status", str(out)])
    assert status.exit_code == 0, status.output
    assert "FINISHED" in status.output
    for part in ("shard 0/3: finished", "shard 1/3: finished", "shard 2/3", "whole: 240/240"):
        assert part in status.output


def test_changing_the_number_of_shards_on_resume_is_refused(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 10)
    first = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], part=Part(0, 2))
    assert first.exit_code == 0 and first.stats.completed < 10
    again = CliRunner().invoke(
        main, shard_command(tmp_path / "p.jsonl", tmp_path / "out", server.url, "1/3")[3:]
    )
    assert again.exit_code == 2
    assert "started as 2 shard(s)" in again.output and "--shard I/2" in again.output


def test_status_names_a_shard_whose_heartbeat_stopped(tmp_path, fake_server, monkeypatch):
    server = fake_server(Behaviour(slots=4, seconds_per_token=0.002))
    write_prompts(tmp_path / "p.jsonl", 80)
    out = tmp_path / "out"
    assert run(tmp_path / "p.jsonl", out, [server.url], part=Part(0, 2)).exit_code == 0
    server.behaviour.seconds_per_token = 0.05  # part 1, not part 0, must still run at its kill
    proc = subprocess.Popen(
        shard_command(tmp_path / "p.jsonl", out, server.url, "1/2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        progress = out / "progress-0001-of-0002.json"
        wait_until(progress.exists, 30, "part 1's progress file", alive=proc)
        time.sleep(1.0)  # part 1 runs on a while, beating, before it is killed
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    monkeypatch.setattr(shard_status, "STALE_AFTER_S", 0.5)
    time.sleep(1.0)  # the heartbeat goes stale by the clock: the wait is the test
    status = CliRunner().invoke(main, ["status", str(out)])
    assert status.exit_code == 0, status.output
    assert "shard 1/2: STALE" in status.output
    assert "shard 0/2: finished" not in status.output or "1 stale" in status.output
    assert "0 running, 1 stale" in status.output


def test_a_fleet_behind_a_router_is_one_url_with_a_large_concurrency(tmp_path, fake_server):
    """An SGLang router or a Kubernetes Service: one URL, many engines behind it. regen keeps
    --concurrency requests in flight on it (the router spreads them), exactly once. Fixed: the
    live level climbs from 16 and this run is too short to reach 200 (test_concurrency.py
    tests the climb)."""
    router = fake_server(Behaviour(slots=256, seconds_per_token=0.05))  # 0.4 s an answer
    ids = write_prompts(tmp_path / "p.jsonl", 600)
    result = run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        [router.url],
        concurrency=200,
        fixed_concurrency=True,
    )
    assert result.exit_code == 0
    assert_exactly_once(tmp_path / "out", ids)
    assert router.peak_in_flight >= 150  # not capped by a per-server default


def test_retry_errors_in_a_shared_dir_retries_only_its_own_part(tmp_path, fake_server):
    failing, healthy = fake_server(faults=["400"]), fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 12)
    out = tmp_path / "out"
    for index in (0, 1):
        run(tmp_path / "p.jsonl", out, [failing.url], part=Part(index, 2))
    result = run(tmp_path / "p.jsonl", out, [healthy.url], part=Part(1, 2), retry_errors=True)
    mine = {i for i in ids if Part(1, 2).owns_id(i)}
    assert result.stats.completed == len(mine) and 0 < len(mine) < 12
    _, errors = assert_exactly_once(out, ids)
    assert {e["id"] for e in errors} == set(ids) - mine  # part 0's errors are part 0's
    assert all("-s0001of0002-" in p.name for p in (out / "errors-retried").glob("*.jsonl"))


def test_every_unusable_line_is_recorded_by_exactly_one_part(tmp_path, fake_server):
    """A line that cannot be used goes by its line number, even when it has a usable id: a
    part that skips other parts' ids unparsed must still record the unusable lines it owns."""

    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 30)
    with open(tmp_path / "p.jsonl", "ab") as fh:
        for n in range(12):  # ids of every part, each on a line of some part
            bad = {"id": f"bad{n}", "messages": [{"role": "system", "content": "no user"}]}
            fh.write(orjson.dumps(bad) + b"\n")
        fh.write(b"{not json\n")
    for index in range(3):
        assert (
            run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], part=Part(index, 3)).exit_code
            == 0
        )
    assert_exactly_once(tmp_path / "out", ids)
    unusable = sorted(e["line"] for e in read_lines(tmp_path / "out", "errors"))
    assert unusable == list(range(31, 44))  # each once, whichever part owns it
