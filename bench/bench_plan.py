"""Benchmark of `regen plan`: does its estimate match the `regen generate` run that follows?

    .venv/bin/python bench/bench_plan.py                # fake fleet + embedded model (~5 min)
    .venv/bin/python bench/bench_plan.py --quick        # smaller fake run, no model (~1 min)
    .venv/bin/python bench/bench_plan.py --skip-model   # the fake fleet only

1. Fake fleet: three fake servers as processes on 127.0.0.1 (`regen.testing.fake_server`),
   one three times slower than the other two, answer lengths log-normal (median 200
   tokens, sigma 1: from a few tokens to past --max-output-tokens, so some are cut), and a
   fixed 50 ms per request. Twice: (a) `regen plan` (temporary calibration) then
   `regen generate` into a fresh dir: the estimate of the whole file against the generate
   command's wall time; (b) `regen plan --output-dir RUN` then `regen generate --output-dir
   RUN`: the estimate of what is left after the kept calibration answers against that run.
2. Embedded model: the real llama.cpp server (SmolLM2-135M) started once by this script,
   a 40-prompt file of two sources, one-word and essay questions (a sample of 12, six of
   each by stratification), the same (a) and (b).

Every command is a child process (`python -m regen ...`); its wall time is measured from
spawn to exit, so start-up is charged to generate as a user sees it. The target: within 25%
on the fake fleet, within 50% on the embedded model. Results: stdout and `.bench/plan.json`.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from fleet_processes import fleet  # the same fake-server processes, started and stopped by pid

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / ".bench"
FAKE_FLAGS = ["--concurrency", "8", "--max-output-tokens", "1500"]
MODEL_FLAGS = ["--concurrency", "2", "--max-output-tokens", "160", "--temperature", "0.7"]


class FakeSpec:
    """A fleet_processes.ServerSpec look-alike with the plan benchmark's knobs."""

    def __init__(self, seconds_per_token: float) -> None:
        self.seconds_per_token = seconds_per_token

    def args(self, port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "regen.testing.fake_server",
            "--port",
            str(port),
            "--slots",
            "64",
            "--seconds-per-token",
            str(self.seconds_per_token),
            "--tokens",
            "200",
            "--tokens-sigma",
            "1.0",
            "--base-latency",
            "0.05",
            "--model",
            "fake-model",
        ]


def regen(args: list[str], timeout: float) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "regen", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"regen {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, done.stdout


def plan_then_generate(
    prompts: Path, urls: list[str], flags: list[str], work: Path, sample: int, timeout: float
) -> dict[str, Any]:
    servers = ["--servers", *urls]
    common = ["--prompts", str(prompts), *servers, *flags]
    plan_s, out = regen(["plan", *common, "--sample", str(sample), "--json"], timeout)
    whole = orjson.loads(out)
    gen_s, _ = regen(
        ["generate", *common, "--output-dir", str(work / "a"), "--display", "none"], timeout
    )
    kept = work / "b"
    keep_s, out = regen(
        ["plan", *common, "--sample", str(sample), "--output-dir", str(kept), "--json"], timeout
    )
    left = orjson.loads(out)
    rest_s, _ = regen(
        ["generate", *common, "--output-dir", str(kept), "--display", "none"], timeout
    )
    return {
        "prompts": whole["prompts"],
        "sample": sample,
        "plan_seconds": round(plan_s, 1),
        "answer_tokens": whole["answer_tokens"],
        "slower_servers": whole["slower_servers"],
        "a_estimate_s": whole["wall_seconds"],
        "a_range_s": [whole["wall_seconds_p10"], whole["wall_seconds_p90"]],
        "a_generate_s": round(gen_s, 1),
        "a_error": round(whole["wall_seconds"] / gen_s - 1, 3),
        "b_plan_seconds": round(keep_s, 1),
        "b_left_items": left["remaining"]["items"],
        "b_estimate_s": round(left["remaining"]["wall_seconds"], 1),
        "b_generate_s": round(rest_s, 1),
        "b_error": round(left["remaining"]["wall_seconds"] / rest_s - 1, 3),
    }


def write_fake_prompts(path: Path, count: int) -> None:
    with open(path, "wb") as fh:
        for i in range(count):
            record = {"id": f"q{i:05d}", "messages": [{"role": "user", "content": f"question {i}"}]}
            fh.write(orjson.dumps(record) + b"\n")


TOPICS = [
    "the sea",
    "bread",
    "a bicycle",
    "winter",
    "a library",
    "trains",
    "the moon",
    "tea",
    "a garden",
    "rain",
]


def write_model_prompts(path: Path, count: int) -> None:
    """Half one-word answers, half essays: a wide answer-length mix on a small model. Each
    names its source dataset, as `regen prepare` writes it, so plan stratifies by it."""
    with open(path, "wb") as fh:
        for i in range(count):
            topic = TOPICS[i % len(TOPICS)]
            source, ask = (
                ("one-word", f"Answer with one word: what colour is {topic}?")
                if i % 2
                else ("essays", f"Write a detailed essay about {topic}.")
            )
            record = {
                "id": f"m{i}",
                "messages": [{"role": "user", "content": ask}],
                "source": {"dataset": source},
            }
            fh.write(orjson.dumps(record) + b"\n")


def bench_fake(work: Path, prompts_count: int, timeout: float) -> dict[str, Any]:
    specs = [FakeSpec(0.002), FakeSpec(0.002), FakeSpec(0.006)]
    write_fake_prompts(work / "fake.jsonl", prompts_count)
    with fleet(specs) as urls:  # type: ignore[arg-type]
        result = plan_then_generate(
            work / "fake.jsonl", urls, FAKE_FLAGS, work / "fake", 100, timeout
        )
        result["slow_server_named"] = result["slower_servers"] == [urls[2]]
    return result


def bench_model(work: Path, timeout: float) -> dict[str, Any]:
    from regen.fleet.embedded import EmbeddedFleet, default_model_path, embedded_spec

    write_model_prompts(work / "model.jsonl", 40)
    with EmbeddedFleet(embedded_spec(default_model_path(), work / "embedded")) as server:
        return plan_then_generate(
            work / "model.jsonl", server.urls, MODEL_FLAGS, work / "model", 12, timeout
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-model", action="store_true")
    parser.add_argument("--skip-fake", action="store_true")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": f"{platform.machine()} {platform.node()}"}
    with tempfile.TemporaryDirectory(prefix="regen-bench-plan-") as tmp:
        work = Path(tmp)
        if not args.skip_fake:
            results["fake"] = bench_fake(work, 600 if args.quick else 1500, args.timeout)
            print(json.dumps({"fake": results["fake"]}, indent=2), flush=True)
        if not (args.quick or args.skip_model):
            results["model"] = bench_model(work, args.timeout)
            print(json.dumps({"model": results["model"]}, indent=2), flush=True)
    BENCH_DIR.mkdir(exist_ok=True)
    (BENCH_DIR / "plan.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
