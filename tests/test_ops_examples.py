"""examples/ops/: the systemd unit pair, the Slurm array script and the Kubernetes Indexed
Job an operator starts from. Each is checked by what can check it here: the units by
systemd-analyze (where installed) and by reading them, the script and the Job's command run
by a shell with a stand-in `regen` that records its arguments and environment; every regen
command line is parsed by regen's own CLI, and each task's or pod's part is what
`part_from_env` makes of the environment the scheduler gives it."""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import xxhash
import yaml

from regen.cli import main
from regen.demo import shipped_files
from regen.format.part import Part, part_from_env

OPS = Path(__file__).parents[1] / "examples" / "ops"
INSTALLED = "/opt/regen/.venv/bin/regen"  # where the units expect regen
SCHEDULER = ("SLURM_", "JOB_COMPLETION_INDEX", "REGEN_SHARD_COUNT")


def parsed(words: list[str]) -> dict:
    """The parameters regen's CLI makes of `regen VERB ARGS...` (a bad flag raises)."""
    assert Path(words[0]).name == "regen", words
    command = main.get_command(main.make_context("regen", [words[1]]), words[1])
    return command.make_context(words[1], words[2:]).params


def unit(name: str) -> configparser.RawConfigParser:
    config = configparser.RawConfigParser(strict=False, comment_prefixes=("#",))
    config.optionxform = str  # systemd's keys are case-sensitive
    config.read(OPS / name)
    return config


def test_the_systemd_units_start_the_fleet_then_the_run_on_it(tmp_path):
    serve, generate = unit("regen-serve.service"), unit("regen-generate.service")
    fleet = parsed(shlex.split(serve["Service"]["ExecStart"]))
    assert fleet["restart_dead"] and fleet["engine"] == "sglang"
    run = parsed(shlex.split(generate["Service"]["ExecStart"]))
    assert str(run["fleet"]) == str(fleet["fleet_path"])  # the run drives that fleet
    loop = shlex.split(generate["Service"]["ExecStartPre"])[2]  # sh -c 'until ...; do ...'
    waits = shlex.split(loop.split(";")[0])
    assert waits[:2] == ["until", INSTALLED]
    assert str(parsed(waits[1:5])["status_of"]) == str(fleet["fleet_path"])
    assert generate["Unit"]["Requires"] == generate["Unit"]["After"] == "regen-serve.service"
    # a rerun resumes exactly once: restarted on failure, except where a person must act
    assert generate["Service"]["Restart"] == serve["Service"]["Restart"] == "on-failure"
    assert generate["Service"]["RestartPreventExitStatus"].split() == ["2", "3", "4"]
    assert serve["Service"]["RestartPreventExitStatus"].split() == ["2", "6"]
    if shutil.which("systemd-analyze"):  # systemd's own check, with this machine's regen
        regen = str(Path(sys.executable).parent / "regen")
        for name in ("regen-serve.service", "regen-generate.service"):
            text = (OPS / name).read_text().replace(INSTALLED, regen)
            (tmp_path / name).write_text(text)
        done = subprocess.run(
            ["systemd-analyze", "verify", "regen-serve.service", "regen-generate.service"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stderr


@pytest.fixture
def stand_in(tmp_path) -> tuple[Path, Path]:
    """A `regen` and an `scontrol` that record each call (one file per call) and exit 0,
    or $STANDIN_EXIT for `regen generate`."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    calls.mkdir()
    script = (
        "#!/bin/sh\n"
        f'log="{calls}/$(date +%s%N)-$(basename "$0")"\n'
        'printf "%s\\n" "$(basename "$0")" "$@" > "$log.args"\n'
        'env > "$log.env"\n'
        '[ "$1" = generate ] && exit "${STANDIN_EXIT:-0}"\n'
        "exit 0\n"
    )
    for name in ("regen", "scontrol"):
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    return bin_dir, calls


def recorded(calls: Path) -> list[tuple[list[str], dict[str, str]]]:
    """(argv, scheduler environment) of each recorded call, in order; then forgotten."""
    out = []
    for args in sorted(calls.glob("*.args")):
        env_lines = args.with_suffix(".env").read_text().splitlines()
        env = dict(line.split("=", 1) for line in env_lines if line.startswith(SCHEDULER))
        out.append((args.read_text().splitlines(), env))
        args.unlink()
        args.with_suffix(".env").unlink()
    return out


def owners(parts: list[Part], ids: list[str]) -> list[int]:
    return [sum(p.owns_id(i) for p in parts) for i in ids]


def test_the_slurm_array_gives_each_task_its_part_and_requeues(stand_in):
    bin_dir, calls = stand_in
    script = OPS / "regen-slurm.sh"
    text = script.read_text()
    first, last = map(int, text.split("#SBATCH --array=")[1].split()[0].split("-"))
    assert "#SBATCH --requeue" in text
    count = last - first + 1
    base = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "SLURM_JOB_ID": "900",
        "SLURM_ARRAY_JOB_ID": "900",
        "SLURM_ARRAY_TASK_MIN": str(first),
        "SLURM_ARRAY_TASK_MAX": str(last),
        "SLURM_ARRAY_TASK_COUNT": str(count),
    }
    parts = []
    for task in range(first, last + 1):
        env = {**base, "SLURM_ARRAY_TASK_ID": str(task)}
        done = subprocess.run(
            ["bash", str(script)], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        (serve, _), (generate, seen), (stop, _) = recorded(calls)
        fleet = parsed(serve)["fleet_path"]
        run = parsed(generate)
        assert str(run["fleet"]) == str(fleet) and str(parsed(stop)["stop_of"]) == str(fleet)
        assert str(run["staging_dir"]).endswith(f"/{task}")  # one staging folder a task
        parts.append(part_from_env(seen))
    assert parts == [Part(i, count) for i in range(count)]
    ids = [f"p{i}" for i in range(2000)]
    assert owners(parts, ids) == [1] * len(ids)  # every prompt in exactly one task
    # generate stopped by something a rerun gets past (5: no server could serve): requeued
    env = {**base, "SLURM_ARRAY_TASK_ID": str(last), "STANDIN_EXIT": "5"}
    done = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 5
    assert [argv for argv, _ in recorded(calls)][2] == ["scontrol", "requeue", f"900_{last}"]
    env["STANDIN_EXIT"] = "2"  # a usage error: not requeued, the message is in the log
    subprocess.run(["bash", str(script)], env=env, capture_output=True, timeout=60)
    assert "scontrol" not in [argv[0] for argv, _ in recorded(calls)]


def test_the_slurm_script_run_as_an_array_with_a_step_covers_every_prompt_once(stand_in):
    """`sbatch --array=0-60:4 regen-slurm.sh`: tasks 0, 4, ..., 60 are parts 0..15."""
    bin_dir, calls = stand_in
    tasks = list(range(0, 61, 4))
    base = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "SLURM_JOB_ID": "901",
        "SLURM_ARRAY_JOB_ID": "901",
        "SLURM_ARRAY_TASK_MIN": "0",
        "SLURM_ARRAY_TASK_MAX": "60",
        "SLURM_ARRAY_TASK_STEP": "4",
        "SLURM_ARRAY_TASK_COUNT": str(len(tasks)),
    }
    parts = []
    for task in tasks:
        env = {**base, "SLURM_ARRAY_TASK_ID": str(task)}
        done = subprocess.run(
            ["bash", str(OPS / "regen-slurm.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        (_, (generate, seen), _) = recorded(calls)
        assert str(parsed(generate)["staging_dir"]).endswith(f"/{task}")
        parts.append(part_from_env(seen))
    assert parts == [Part(i, len(tasks)) for i in range(len(tasks))]
    ids = [f"p{i}" for i in range(2000)]
    assert owners(parts, ids) == [1] * len(ids)


def test_the_kubernetes_indexed_job_gives_each_pod_its_part(stand_in):
    bin_dir, calls = stand_in
    job = yaml.safe_load((OPS / "regen-k8s-job.yaml").read_text())
    spec = job["spec"]
    assert (job["apiVersion"], job["kind"], spec["completionMode"]) == (
        "batch/v1",
        "Job",
        "Indexed",
    )
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    count = spec["completions"]
    assert int(env["REGEN_SHARD_COUNT"]) == count and 1 <= spec["parallelism"] <= count
    # a failed pod is started again for its index, unless a person must act (2, 3, 4)
    assert pod["restartPolicy"] == "Never"  # what podFailurePolicy requires
    rules = {rule["action"]: rule for rule in spec["podFailurePolicy"]["rules"]}
    assert set(rules) == {"FailJob", "Ignore"}
    assert rules["FailJob"]["onExitCodes"]["values"] == [2, 3, 4]
    assert rules["FailJob"]["onExitCodes"]["containerName"] == container["name"]
    # a drained or preempted pod is started again without using up its index's retries
    assert rules["Ignore"]["onPodConditions"] == [{"type": "DisruptionTarget"}]
    # the engines' tensor-parallel workers share memory through /dev/shm: a memory volume
    (shm,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == shm["name"]]
    assert volume["emptyDir"]["medium"] == "Memory"
    assert container["command"] == ["/bin/sh", "-c"]
    ids = [f"p{i}" for i in range(2000)]
    parts = []
    for index in range(count):
        pod_env = {
            **os.environ,
            **env,
            "JOB_COMPLETION_INDEX": str(index),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        }
        done = subprocess.run(
            ["/bin/sh", "-c", container["args"][0]],
            env=pod_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        (serve, _), (generate, seen) = recorded(calls)
        assert str(parsed(generate)["fleet"]) == str(parsed(serve)["fleet_path"])
        parts.append(part_from_env(seen))
    assert parts == [Part(i, count) for i in range(count)]
    assert owners(parts, ids) == [1] * len(ids)
    assert xxhash.xxh3_64_intdigest(b"p0") % count == next(
        i for i, p in enumerate(parts) if p.owns_id("p0")
    )


def test_the_ops_files_are_not_demo_files():
    """`regen demo` writes the walkthrough's files; examples/ops/ stays in the repository."""
    assert not [name for name, _ in shipped_files() if name.startswith("ops/")]
