"""What a new user and an expert tripped on in generate's input, its shards, `status` and
`plan` (issue 45): each message says what is true of what the user gave and of what was
written."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from gen_helpers import quick_config, read_lines, run, write_prompts
from regen.cli import main
from regen.display.text import shard_lines
from regen.errors import ConfigError, FleetUnavailable, RunStateError
from regen.fleet.dispatch import HealthPolicy, RetryPolicy
from regen.format.part import parse_part, part_from_env
from regen.plan.calibrate import plan
from regen.run.generate import generate
from regen.run.startup import leave_nothing_behind
from regen.run.status import read_status
from regen.testing.fake_tools import tool_caller
from trace_helpers import weather_trace


def test_generate_refuses_an_empty_prompt_into_errors_as_prepare_does(tmp_path, fake_server):
    """`{"prompt": ""}`, a blank one and a messages list whose user turn is empty are each
    refused as `empty_prompt` (prepare's name for them), never answered as a training row."""
    write_prompts(tmp_path / "good.jsonl", 4)
    good = (tmp_path / "good.jsonl").read_bytes()
    empty = [
        {"id": "e1", "prompt": ""},
        {"id": "e2", "prompt": "  \n\t"},
        {
            "id": "e3",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": " "},
            ],
        },
    ]
    prompts = tmp_path / "p.jsonl"
    prompts.write_bytes(good + b"".join(orjson.dumps(r) + b"\n" for r in empty))
    result = run(prompts, tmp_path / "run", [fake_server().url])
    assert result.exit_code == 0
    assert sorted(r["id"] for r in read_lines(tmp_path / "run", "completions")) == [
        "p00000",
        "p00001",
        "p00002",
        "p00003",
    ]
    errors = {r["id"]: r for r in read_lines(tmp_path / "run", "errors")}
    assert set(errors) == {"e1", "e2", "e3"}
    for error in errors.values():
        assert error["error"]["type"] == "empty_prompt", error
        assert "user turns are empty" in error["error"]["message"]
        assert "give the line's user turn its text" in error["error"]["message"]


def test_check_flags_an_empty_prompt_in_a_finished_run(tmp_path):
    """A run from before generate refused them holds answers to nothing: `empty_prompt`
    fails at any share."""
    blank = checkfix.completion("blank", "Hello! How can I help?", prompt=" ")
    run_dir = checkfix.write_run(tmp_path / "run", [*checkfix.healthy(), blank])
    out = tmp_path / "r.json"
    tokenizer = str(checkfix.qwen_style_dir())
    args = ["check", str(run_dir), "--tokenizer", tokenizer, "--json", str(out)]
    result = CliRunner().invoke(main, args)
    report = json.loads(out.read_text())
    assert result.exit_code == 1 and report["failed_rules"] == ["empty_prompt"], result.output
    assert report["overall"]["flags"]["empty_prompt"] == 1
    assert "FAIL empty_prompt" in result.output


def test_a_shard_taken_from_the_environment_is_said_at_start_and_in_status(
    tmp_path, fake_server, monkeypatch
):
    """SLURM_ARRAY_* made this process half of the run unasked: the header names the
    variables, and `status` shows where the shard came from and the half not started."""
    write_prompts(tmp_path / "p.jsonl", 30)
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "0")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    out = tmp_path / "run"
    done = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "-o",
            str(out),
            "--servers",
            fake_server().url,
            "--display",
            "plain",
        ],
    )
    assert done.exit_code == 0, done.output
    origin = "SLURM_ARRAY_TASK_ID=0, SLURM_ARRAY_TASK_COUNT=2"
    assert f"shard       0/2, from {origin}: this process does part 0 of 2" in done.output
    assert "--shard 0/1 does them all" in done.output
    status = CliRunner().invoke(main, ["status", str(out)])
    assert status.exit_code == 0, status.output
    assert "NOT FINISHED: 1 of 2 shards not started (0 of 2" in status.output
    assert f"shard 0/2 (from {origin}): finished" in status.output
    assert "shard 1/2: not started (run it with --shard 1/2)" in status.output


def test_a_flag_given_shard_is_said_too_and_a_bad_variable_is_named():
    (line,) = shard_lines(parse_part("1/4").described())
    assert line.startswith("shard       1/4, from --shard: this process does part 1 of 4")
    assert "--shard 0/1" not in line
    k8s = part_from_env({"JOB_COMPLETION_INDEX": "2", "REGEN_SHARD_COUNT": "5"})
    assert k8s.described() == {
        "part": "2/5",
        "environment": True,
        "from": "JOB_COMPLETION_INDEX=2, REGEN_SHARD_COUNT=5",
    }
    with pytest.raises(ConfigError, match=r"SLURM_ARRAY_TASK_ID='x'.*not a whole number"):
        part_from_env({"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "2"})
    too_far = {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "2"}
    with pytest.raises(ConfigError, match=r"\(from SLURM_ARRAY_TASK_ID=3, SLURM_ARRAY_TASK_"):
        part_from_env(too_far)


def test_status_of_a_sharded_run_names_each_shards_process_not_pid_none(tmp_path, fake_server):
    write_prompts(tmp_path / "p.jsonl", 8)
    out = tmp_path / "run"
    for part in ("0/2", "1/2"):
        args = [
            "generate",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "-o",
            str(out),
            "--servers",
            fake_server().url,
            "--display",
            "none",
            "--shard",
            part,
        ]
        assert CliRunner().invoke(main, args).exit_code == 0
    status = CliRunner().invoke(main, ["status", str(out)]).output
    assert "None" not in status, status
    assert status.splitlines()[0].endswith(": FINISHED (0 of 2 shards have a fresh heartbeat)")
    pid = os.getpid()  # CliRunner runs generate in this process
    assert status.count(f"pid {pid} on {socket.gethostname()}, heartbeat") == 2, status


@pytest.mark.model
def test_a_refused_return_token_ids_start_leaves_no_lock_or_server_log(tmp_path):
    """The embedded server started well, then preflight refused the flag: its log says
    nothing of why, and a folder holding it and run.lock would look like a run."""
    write_prompts(tmp_path / "p.jsonl", 2)
    config = quick_config(tmp_path / "p.jsonl", tmp_path / "run", [], return_token_ids=True)
    with pytest.raises(ConfigError, match="do not return token ids"):
        generate(config)
    assert not (tmp_path / "run").exists()


def test_a_failed_embedded_start_keeps_its_server_log(tmp_path):
    """What the fix must not remove: the log of a server that did not come up says why."""
    root = tmp_path / "run"
    with pytest.raises(FleetUnavailable), leave_nothing_behind(root) as leftovers:
        (root / "servers").mkdir(parents=True)
        (root / "run.lock").write_text("{}")
        (root / "servers" / "server-0.log").write_text("error: out of memory")
        leftovers.server_logs = True
        raise FleetUnavailable("the embedded server died")
    assert (root / "servers" / "server-0.log").read_text() == "error: out of memory"


def test_a_down_tool_server_stops_the_run_at_give_up_after_not_after_a_backoff(
    tmp_path, fake_server
):
    """The tool server asks for 60 s (429, Retry-After: 60); --give-up-after 1 bounds the
    wait: the run stops after about a second, where it used to sleep the 60 s out first."""
    target = fake_server(answer=tool_caller())
    tools = fake_server(faults=["429"], retry_after=60)
    prompts = tmp_path / "p.jsonl"
    prompts.write_bytes(orjson.dumps(weather_trace("t0", "Lyon")) + b"\n")
    result = run(
        prompts,
        tmp_path / "out",
        [target.url],
        regenerate_turns="all",
        tool_server=f"{tools.url}/v1/chat/completions",
        health=HealthPolicy(give_up_after=1.0),
        retry=RetryPolicy(max_retries=3, base_delay=0.05, max_delay=60),
    )
    assert result.exit_code == 5, result.message
    waited = re.search(r"has not answered for (\d+)s \(--give-up-after 1\)", result.message)
    assert waited is not None, result.message
    assert int(waited.group(1)) < 30  # not the 60 s it asked for


def test_status_of_a_limit_trial_says_it_did_its_limit_and_how_to_go_on(
    tmp_path, fake_server, monkeypatch
):
    """Not "FINISHED ... 14 left": the trial finished its N, the rest was never taken."""
    monkeypatch.chdir(tmp_path)
    write_prompts(tmp_path / "p.jsonl", 20)
    args = [
        "generate",
        "--prompts",
        "p.jsonl",
        "-o",
        "run",
        "--servers",
        fake_server().url,
        "--display",
        "none",
        "--limit",
        "6",
    ]
    assert CliRunner().invoke(main, args).exit_code == 0
    status = CliRunner().invoke(main, ["status", "run"]).output
    assert status.startswith("run: FINISHED ITS --limit 6 (pid"), status
    assert "6 completions, 0 errors; 14 not taken (--limit 6 took the first 6 lines)" in status
    assert "14 left" not in status
    rest = [line for line in status.splitlines() if line.startswith("the rest with: ")]
    assert rest == [
        f"the rest with: cd {tmp_path} && regen generate --prompts p.jsonl -o run "
        f"--servers {args[6]} --display none"
    ], status


def test_a_corrupt_line_mid_shard_is_no_item_and_the_refusal_says_what_to_do(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 6)
    out = tmp_path / "run"
    assert run(tmp_path / "p.jsonl", out, [server.url]).exit_code == 0
    (shard,) = (out / "completions").glob("*.jsonl")
    lines = shard.read_bytes().splitlines(keepends=True)
    shard.write_bytes(b"".join([*lines[:2], b'{"id": "p000\n', *lines[2:]]))
    count = read_status(out)["count"]
    assert (count["items"], count["completions"], count["left"]) == (6, 6, 0)
    with pytest.raises(RunStateError) as err:
        run(tmp_path / "p.jsonl", out, [server.url])
    assert "line 3 is not a JSON record" in err.value.message
    assert f"sed -i '3d' {shard}" in (err.value.hint or "")
    subprocess.run(["sed", "-i", "3d", str(shard)], check=True)  # the hint, followed
    assert run(tmp_path / "p.jsonl", out, [server.url]).exit_code == 0
    ids = sorted(r["id"] for r in read_lines(out, "completions"))
    assert ids == [f"p{i:05d}" for i in range(6)]


def test_status_names_prompts_with_no_source_as_such_not_none(tmp_path, fake_server):
    server = fake_server(answer=tool_caller())
    rows = [weather_trace("same", "Paris"), weather_trace("other", "Lyon")]
    prompts = tmp_path / "p.jsonl"
    prompts.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    run(prompts, tmp_path / "out", [server.url], regenerate_turns="all")
    shown = CliRunner().invoke(main, ["status", str(tmp_path / "out")]).output
    assert "(this session): prompts with no source 1 of 2" in shown, shown
    assert "(none)" not in shown


def test_plan_counts_what_is_left_of_a_run_with_repeated_ids_as_status_does(tmp_path, fake_server):
    """A repeated id is one unusable line, one item, for generate, status and plan alike:
    plan on a half-done run said "the other 8" where status said 13 left."""
    rows = []
    for i in range(20):
        rows.append({"id": f"q{i}", "prompt": f"question {i}"})
        if i % 4 == 0:
            rows.append({"id": f"q{i}", "prompt": f"again {i}"})  # 5 repeats in all
    prompts = tmp_path / "p.jsonl"
    prompts.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    server = fake_server()
    out = tmp_path / "run"
    assert run(prompts, out, [server.url], limit=12).exit_code == 0  # 9 answers, 3 repeats
    report = plan(quick_config(prompts, out, [server.url]), sample_size=2, keep=True)
    assert (report.prompts, report.bad_lines) == (20, 5)
    left = read_status(out)["count"]["left"]
    assert left == 25 - 12
    assert report.remaining is not None and report.remaining["items"] == left
