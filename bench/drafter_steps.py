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
    samples: int = 1,
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
            "--samples-per-prompt",
            samples,
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


def export(
    runs: Sequence[Path], out: Path, log: Path, *, allow: Sequence[str], flags: Sequence
) -> Path:
    """One export of the runs, in the target's template and masks."""
    limits = [arg for rule in allow for arg in ("--max", rule)]
    regen(
        ["export", *runs, "-o", out, "--tokenizer", "embedded", "--overwrite", *limits, *flags],
        log,
        timeout=1800,
    )
    return out


def score(
    run: Path, drafts: Sequence[Path], out: Path, log: Path, *, k: str, sample: int = 0
) -> dict:
    """Every draft on every row of the run (or `sample` rows a domain), in one report (a draft
    scored before into `out` is kept, and none of its rows is scored again). One thread:
    see drafter_train.Budget."""
    flags = [arg for draft in drafts for arg in ("--draft", draft)]
    flags += ["--sample", sample] if sample else ["--all"]
    flags += ["--tokenizer", "embedded", "--k", k, "--threads", 1, "-o", out]
    regen(
        ["score", run, *flags],
        log,
        timeout=6 * 3600,
    )
    return json.loads((out / "score.json").read_text())
