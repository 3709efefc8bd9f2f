"""The walkthrough as it runs: replayed in order in one fresh directory from the files that
`regen demo` writes (what a `pip install regen` user has), it prints what the docs'
walkthrough page shows under each command in full, and what the README's ten-minute version
shows cut short, in that order, on the embedded model (the real SmolLM2 llama.cpp server;
`--seed 7` makes its answers the same on every machine).

A shown line `...` stands for lines left out, and `...` in a line for text cut out of it.
Figures that differ per machine (times, ports, pids, the host, rates, latencies, durations,
the absolute path `$WORK`) are normalised on both sides by the narrow patterns of MACHINE;
every other character must be what regen printed."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import session_tmp
import warmups
from walkthrough_helpers import REPLAYED, SHOWN_IN, WALKTHROUGH, assert_prints, shown

# The README shows these commands' stdout: plan's calibration progress goes to stderr (the
# README says so), and so do the progress bars of `datasets`.
STDOUT_ONLY = {c for c in REPLAYED if c.startswith(("regen plan", "python "))}
EXIT = {"regen check work/run --tokenizer embedded --html work/report.html": 1}  # verdict FAIL


def argv(command: str) -> list[str]:
    words = shlex.split(command)
    head = {"regen": [sys.executable, "-m", "regen"], "python": [sys.executable]}[words[0]]
    return head + words[1:]


def llama_servers_on(ports: set[str]) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "llama_cpp.server" in cmdline and ports & set(cmdline):
            found.append(proc)
    return found


Replay = tuple[Path, dict[str, subprocess.CompletedProcess], list[str]]


def replay(env_now: dict[str, str]) -> Replay:
    """Every replayed command, run once, in order, in one fresh directory, as a user would
    (stdout piped): plan and generate start and stop the embedded server themselves. Also
    the servers a command left running (stopped here, by pid). A warm-up: it runs in the
    background from the end of collection (tests/warmups.py)."""
    where = session_tmp.folder("walkthrough-")
    left: list[str] = []
    env = {k: v for k, v in env_now.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr interleave as on a terminal
    done: dict[str, subprocess.CompletedProcess] = {}
    for command in REPLAYED:
        # What a terminal shows: stdout and stderr together, but for STDOUT_ONLY.
        stderr = subprocess.PIPE if command in STDOUT_ONLY else subprocess.STDOUT
        run = subprocess.run(
            argv(command),
            cwd=where,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=600,
        )
        done[command] = run
        ports = set(re.findall(r"127\.0\.0\.1:(\d+)", run.stdout + (run.stderr or "")))
        for proc in llama_servers_on(ports):
            left.append(f"{command}: pid {proc.pid} {proc.info['cmdline']}")
            proc.kill()
        if run.returncode != EXIT.get(command, 0):
            break  # the later steps need this one
    return where, done, left


warmups.register("walkthrough", replay)


@pytest.fixture(scope="module")
def walkthrough() -> Iterator[Replay]:
    replayed = warmups.result("walkthrough")
    yield replayed
    shutil.rmtree(replayed[0])


@pytest.mark.model
@pytest.mark.parametrize("command", REPLAYED)
def test_the_walkthrough_prints_what_the_docs_and_the_readme_show(walkthrough, command):
    where, done, _ = walkthrough
    assert command in done, "an earlier step failed"
    run = done[command]
    assert run.returncode == EXIT.get(command, 0), run.stdout + (run.stderr or "")
    assert shown(command, WALKTHROUGH.read_text()) is not None, f"docs/walkthrough.md: no {command}"
    for name, text in SHOWN_IN.items():
        expected = shown(command, text())
        if expected is not None:
            try:
                assert_prints(expected, run.stdout, str(where / "work"))
            except AssertionError as e:
                raise AssertionError(f"{name}: {e}") from None


@pytest.mark.model
def test_the_walkthrough_leaves_no_server_running(walkthrough):
    _, done, left = walkthrough
    assert len(done) == len(REPLAYED) and not left


@pytest.mark.model
def test_the_walkthroughs_run_is_whole_and_its_export_supervises_every_row(walkthrough):
    """The end-to-end checks beyond the printed text, on the same real run (the embedded
    server, the model's own tokenizer and template): every prompt answered once, the seven
    sources in check's report, a supervised token in every row `datasets` loads."""
    import datasets

    from regen.run.status import read_status

    where, done, _ = walkthrough
    assert len(done) == len(REPLAYED), "an earlier step failed"
    count = read_status(where / "work" / "run")["count"]
    assert (count["items"], count["completions"], count["errors"], count["left"]) == (20, 20, 0, 0)
    check = next(run for command, run in done.items() if command.startswith("regen check"))
    assert len(re.findall(r"^== source ", check.stdout, re.M)) == 7
    train = datasets.load_dataset(str(where / "work" / "tokenized"))["train"]
    assert len(train) > 0
    for row in train:
        assert sum(row["loss_mask"]) > 0 and len(row["input_ids"]) == len(row["loss_mask"])
