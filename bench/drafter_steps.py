"""The real verbs bench_drafter.py runs, each as a user runs it: `regen prepare`, `serve`,
`generate`, `check`, `export` and `score`, in processes of this environment's regen."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REGEN = [sys.executable, "-m", "regen"]


def regen(args: Sequence[str], log: Path, timeout: float) -> float:
    """Run one regen command, its output appended to `log`; the seconds it took. A failure
    stops the bench with the command and the end of its output."""
    started = time.monotonic()
    with log.open("a") as out:
        out.write(f"\n$ regen {' '.join(map(str, args))}\n")
        out.flush()
        done = subprocess.run(
            [*REGEN, *map(str, args)], stdout=out, stderr=subprocess.STDOUT, timeout=timeout
        )
    if done.returncode != 0:
        tail = log.read_text().splitlines()[-15:]
        raise SystemExit(
            f"regen {' '.join(map(str, args))} exited {done.returncode}:\n" + "\n".join(tail)
        )
    return time.monotonic() - started


def prepare(recipe: Path, out: Path, log: Path) -> Path:
    regen(["prepare", recipe, "-o", out], log, timeout=600)
    return out


def generate(
    prompts: Path,
    run: Path,
    log: Path,
    *,
    server: Sequence[str],
    max_tokens: int,
    temperature: float,
    seed: int,
    timeout: float,
) -> float:
    """Answers for every prompt (a rerun resumes: what the run holds is not asked again)."""
    return regen(
        [
            "generate",
            "--prompts",
            prompts,
            "-o",
            run,
            *server,
            "--max-output-tokens",
            max_tokens,
            "--temperature",
            temperature,
            "--seed",
            seed,
            "--display",
            "plain",
            "--log-interval",
            60,
        ],
        log,
        timeout=timeout,
    )


@contextmanager
def served(gguf: Path, fleet: Path, log: Path, engine_args: Sequence[str]) -> Iterator[Path]:
    """A llama.cpp server of another model, started by `regen serve` and stopped by its pid."""
    regen(
        ["serve", "--engine", "llamacpp", "--model", gguf, "--fleet", fleet, "--", *engine_args],
        log,
        timeout=900,
    )
    try:
        yield fleet
    finally:
        regen(["serve", "--stop", fleet], log, timeout=120)


def check(run: Path, report: Path, log: Path, *, allow: Sequence[str]) -> dict:
    """`regen check`'s JSON report. A failed verdict (exit 1) does not stop the bench: the
    table says which run failed and why, as a user would read it before training."""
    limits = [arg for rule in allow for arg in ("--max", rule)]
    args = ["check", run, "--tokenizer", "embedded", "--json", report, *limits]
    with log.open("a") as out:
        out.write(f"\n$ regen {' '.join(map(str, args))}\n")
        out.flush()
        done = subprocess.run(
            [*REGEN, *map(str, args)], stdout=out, stderr=subprocess.STDOUT, timeout=1800
        )
    if done.returncode not in (0, 1):
        raise SystemExit(f"regen check {run} exited {done.returncode}: see {log}")
    return json.loads(report.read_text())


def export(
    run: Path, out: Path, log: Path, *, holdout: float, seed: int, allow: Sequence[str]
) -> Path:
    """A tokenised export with the held-out split, in the target's template and masks."""
    limits = [arg for rule in allow for arg in ("--max", rule)]
    regen(
        [
            "export",
            run,
            "-o",
            out,
            "--format",
            "tokenized",
            "--tokenizer",
            "embedded",
            "--holdout",
            holdout,
            "--holdout-seed",
            seed,
            "--overwrite",
            *limits,
        ],
        log,
        timeout=1800,
    )
    return out


def score(
    run: Path, drafts: Sequence[Path], out: Path, log: Path, *, holdout: float, seed: int, k: str
) -> dict:
    """Every draft on the run's held-out prompts, every row, in one report."""
    flags = [arg for draft in drafts for arg in ("--draft", draft)]
    regen(
        [
            "score",
            run,
            *flags,
            "--tokenizer",
            "embedded",
            "--holdout",
            holdout,
            "--holdout-seed",
            seed,
            "--split",
            "holdout",
            "--all",
            "--k",
            k,
            "-o",
            out,
        ],
        log,
        timeout=3600,
    )
    return json.loads((out / "score.json").read_text())
