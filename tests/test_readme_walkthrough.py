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
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import warmups

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
WALKTHROUGH = ROOT / "docs" / "walkthrough.md"  # every command, every line it prints


def readme_walkthrough() -> str:
    """The README's ten-minute walkthrough (the text between its two headings)."""
    text = README.read_text()
    return text[text.index("## Ten minutes on the embedded") : text.index("## On a real fleet")]


# Where the walkthrough is shown: the docs page in full, the README cut short.
SHOWN_IN = {"docs/walkthrough.md": WALKTHROUGH.read_text, "README.md": readme_walkthrough}
CONSOLE = re.compile(r"```console\n(.*?)```", re.S)

# The walkthrough's commands, in the order a user runs them.
REPLAYED = [
    "regen demo",
    "regen prepare examples/recipe.yaml --output work/prompts.jsonl",
    "regen plan --prompts work/prompts.jsonl --output-dir work/run --max-output-tokens 256"
    " --seed 7 --sample 8",
    "regen generate --prompts work/prompts.jsonl --output-dir work/run --max-output-tokens 256"
    " --seed 7",
    "regen status work/run",
    "regen check work/run --tokenizer embedded --html work/report.html",
    "regen export work/run --output-dir work/specforge --format specforge",
    "regen export work/run --output-dir work/tokenized --format tokenized --tokenizer embedded"
    " --drop-degenerate --license apache-2.0",
    "python -c \"import datasets; print(datasets.load_dataset('work/tokenized', 'math'))\"",
]
# Walkthrough commands not replayed, and why.
NOT_REPLAYED = {
    # Two more servers, that steps 3-7 do not use: tests/test_serve.py runs serve (on
    # stand-in engines).
    "regen serve --engine llamacpp": "a fleet beside the walkthrough's embedded runs",
    "regen serve --status": "that fleet's status",
    "regen serve --engine sglang": "needs GPUs and SGLang",
    "regen serve --engine vllm": "needs GPUs and vLLM",
    "regen plan --prompts /data/prompts.jsonl": "a fleet of GPUs",
    "regen generate --prompts work/prompts.jsonl --output-dir /data/run": "a fleet of GPUs",
    "setsid regen generate": "a multi-day run on a GPU node",
    "regen status /data/run": "that run's status",
    "tail -f": "that run's log",
}
# The README shows these commands' stdout: plan's calibration progress goes to stderr (the
# README says so), and so do the progress bars of `datasets`.
STDOUT_ONLY = {c for c in REPLAYED if c.startswith(("regen plan", "python "))}
EXIT = {"regen check work/run --tokenizer embedded --html work/report.html": 1}  # verdict FAIL

TIME = r"\d+m\d\ds"  # a duration as regen prints one: 0m32s
MACHINE = [
    (r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] ", "[TIME] "),
    (r"127\.0\.0\.1:\d+", "127.0.0.1:PORT"),
    (r"\bpid \d+ on [\w.-]+;", "pid PID on HOST;"),
    (r"\b\d+\.\d\d( compl)?/s", r"RATE\1/s"),
    (r"\b\d+ (output )?tok/s", r"RATE \1tok/s"),
    (rf"\bETA {TIME}", "ETA TIME"),
    (rf"\b((?:in|about|P10|P90|estimate) +){TIME}", r"\1TIME"),
    (r"\blatency (mean )?\d+\.\ds( P90 \d+\.\ds)?", r"latency \1LATENCY"),
    (r"\bupdated \d+\.\ds ago", "updated SECONDS ago"),
    (r"\bdrain \d+(\.\d+s|ms), fleet idle \d+%", "drain SECONDS, fleet idle SHARE"),
]
# A progress line logged every --log-interval (30 s) while requests are in flight: how many
# print, and the counts at each, depend on the machine's speed (none on one that finishes in
# 30 s; no ETA yet on one that has not finished an answer by then).
PERIODIC = re.compile(
    r"^\[TIME\] (?P<done>\d+)/(?P<total>\d+) \(\d+\.\d%\) RATE compl/s RATE tok/s"
    r" ETA (TIME|\?) errors 0 servers 1/1 up, [1-9]\d* in flight$"
)


def shown(command: str, text: str) -> list[str] | None:
    """The lines TEXT shows under `$ <command>`, up to its next command (None: not shown)."""
    for block in CONSOLE.findall(text):
        lines = block.splitlines()
        if f"$ {command}" in lines:
            after = lines[lines.index(f"$ {command}") + 1 :]
            end = next((i for i, line in enumerate(after) if line.startswith("$ ")), len(after))
            return [line for line in after[:end] if line.strip()]
    return None


def normalise(line: str, work: str | None = None) -> str:
    if work is not None:
        line = line.replace(work, "$WORK")
    for pattern, replacement in MACHINE:
        line = re.sub(pattern, replacement, line)
    periodic = PERIODIC.match(line)
    if periodic and periodic["done"] != periodic["total"]:
        return f"[TIME] (every 30 s) N/{periodic['total']}, errors 0 servers 1/1 up"
    return line


def pattern(expected: list[str]) -> str:
    """A regex for the printed text (normalised lines, each ending in a newline)."""
    parts = []
    for line in expected:
        line = normalise(line)
        if line == "...":
            parts.append(r"(?:.*\n)*?")
        elif line.startswith("[TIME] (every 30 s)"):
            parts.append(rf"(?:{re.escape(line)}\n)*")
        else:  # text cut out of a long line
            parts.append(".*".join(re.escape(cut.rstrip()) for cut in line.split("...")) + r"\n")
    return "".join(parts)


def assert_prints(expected: list[str], printed: str, work: str) -> None:
    text = "".join(normalise(line, work) + "\n" for line in printed.splitlines() if line.strip())
    if re.fullmatch(pattern(expected), text):
        return
    shown_until = max(n for n in range(len(expected) + 1) if re.match(pattern(expected[:n]), text))
    want = expected[shown_until] if shown_until < len(expected) else "(nothing more)"
    raise AssertionError(f"shown line {want!r} is not what printed next:\n{text}")


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
    where = Path(tempfile.mkdtemp(prefix="regen-walkthrough-"))
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


@pytest.mark.parametrize("where", SHOWN_IN)
def test_every_walkthrough_command_is_replayed_or_says_why_not(where):
    commands = re.findall(r"^\$ (.*)$", SHOWN_IN[where](), re.M)
    assert commands
    for command in commands:
        assert command in REPLAYED or any(command.startswith(c) for c in NOT_REPLAYED), command


def test_the_readme_walkthrough_shows_every_step_but_the_fleet_in_order():
    commands = re.findall(r"^\$ (.*)$", readme_walkthrough(), re.M)
    assert commands == REPLAYED


@pytest.mark.parametrize(
    ("readme", "printed"),
    [
        (
            "[2026-11-30 13:21:30] 14/20 (70.0%) 0.50 compl/s 57 tok/s ETA 0m12s errors 0 servers"
            " 1/1 up, 2 in flight",
            "[2026-12-01 09:00:00] 9/20 (45.0%) 0.28 compl/s 9 tok/s ETA 1m36s errors 0 servers"
            " 1/1 up, 1 in flight",
        ),
        (
            "work/run: FINISHED (pid 27597 on vm; no process holds the run lock)",
            "work/run: FINISHED (pid 3 on gpu-node.lan; no process holds the run lock)",
        ),
        (
            "  http://127.0.0.1:34699: 20 done, 0 failed attempts, latency 2.6s",
            "  http://127.0.0.1:8080: 20 done, 0 failed attempts, latency 13.0s",
        ),
        (
            "end of batch: drain 1.8s, fleet idle 39% of it",
            "end of batch: drain 757ms, fleet idle 100% of it",
        ),
    ],
)
def test_only_figures_of_the_machine_are_normalised(readme, printed):
    assert_prints([readme], printed, "/x/work")
    for was, now in [("0 failed", "1 failed"), ("of it", ""), ("1/1 up", "0/1 up"), ("ED", "")]:
        if was in printed:
            changed = printed.replace(was, now)
            with pytest.raises(AssertionError):
                assert_prints([readme], changed, "/x/work")


def test_a_periodic_progress_line_may_print_any_number_of_times_but_nothing_else():
    readme = [
        "[2026-11-30 13:21:30] 8/20 (40.0%) 0.00 compl/s 0 tok/s ETA ? errors 0 servers 1/1 up,"
        " 0 in flight",
        "[2026-11-30 13:22:00] 19/20 (95.0%) 0.39 compl/s 39 tok/s ETA 0m02s errors 0 servers"
        " 1/1 up, 1 in flight",
        "done: 12 new completions, 0 errors; the run has 20 of 20 items, 0 left; output in"
        " work/run",
    ]
    start, periodic, end = readme
    slow = periodic.replace("19/20 (95.0%)", "8/20 (40.0%)").replace("ETA 0m02s", "ETA ?")
    for middle in ([], [periodic], [slow, periodic.replace("19/20", "15/20")]):
        assert_prints(readme, "\n".join([start, *middle, end]), "/x/work")
    for wrong in (
        periodic.replace("errors 0", "errors 2"),
        periodic.replace("1 in flight", "0 in flight"),
        "a line the README does not show",
    ):
        with pytest.raises(AssertionError):
            assert_prints(readme, "\n".join([start, wrong, end]), "/x/work")


@pytest.mark.parametrize("page", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=str)
def test_the_docs_name_no_path_of_anyones_machine(page):
    assert not re.search(r"/tmp/\w+/work|/work/(wt|main)|/home/(?!you/)\w+", page.read_text())
