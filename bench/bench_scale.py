"""Memory and restart at 1M and 10M prompts: today's code (a git ref) beside this tree.

    .venv/bin/python bench/bench_scale.py                       # 1M and 10M, baseline main~
    .venv/bin/python bench/bench_scale.py --sizes 1000000 --baseline 3d05314
    .venv/bin/python bench/bench_scale.py --sizes 10000000 --shards 4   # part 0 of 4 resumes

For each size N: a prompt file of N lines and, for each code tree (the baseline ref, extracted
with `git archive`, and this tree), an output dir in which N - NEW prompts are already
finished: sealed 20,000-record shards with `.keys` sidecars, synthesized by
`synthetic_output.synthesize_output` run with that tree's own code, so each tree resumes files
in the format it writes. Then each tree's `regen generate` resumes its run against one fake
server (a separate process on 127.0.0.1) and makes the NEW completions.
Reported per tree: peak RSS of the regen process (sampled every 50 ms) and the time from
process start to the first request the fake server received. The new shards are removed
between runs, so both trees resume exactly the same state.

Results: a table on stdout and `.bench/scale.json` (`scale-N-shards.json` with --shards).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fleet_processes import ServerSpec, fleet, fleet_stats
from generate_child import regen_cmd, run_regen, write_prompts
from workspace import BENCH_DIR, ROOT, machine

SYNTHETIC = "part-19700101T000000-bench-"  # the prefix of synthesize_output's shards


def baseline_tree(ref: str) -> Path:
    """The baseline's src/, extracted once per ref (or a src/ directory given as is)."""
    if Path(ref, "regen").is_dir():
        return Path(ref).resolve()
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", ref],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tree = BENCH_DIR / f"baseline-{sha}"
    if not (tree / "src").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", sha, "src"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree / "src"


def reset(out: Path) -> None:
    """Back to the synthesized state: only the bench's own shards stay."""
    for kind in ("completions", "errors"):
        for path in (out / kind).glob("*"):
            if not path.name.startswith(SYNTHETIC):
                path.unlink()


def resume_once(
    src: Path, prompts: Path, out: Path, timeout: float, shards: int = 1
) -> dict[str, Any]:
    reset(out)
    os.environ["PYTHONPATH"] = str(src)
    cmd_shard = ["--shard", f"0/{shards}"] if shards > 1 else []
    try:
        with fleet([ServerSpec(64, 0.0, 8)]) as urls:
            cmd = regen_cmd(prompts, out, urls, 64) + cmd_shard
            run = run_regen(cmd, timeout, out.parent / "regen.log")
            stats = fleet_stats(urls)
    finally:
        os.environ.pop("PYTHONPATH", None)
    return {
        "new_generated": stats["served"],
        "peak_rss_mb": round(run.peak_rss_mb, 1),
        "first_request_s": round(stats["first_request_at"] - run.started_at, 2),
        "process_wall_s": round(run.wall_s, 2),
    }


def bench_size(
    n: int, new: int, trees: dict[str, Path], timeout: float, shards: int = 1
) -> dict[str, Any]:
    work = BENCH_DIR / f"scale-{n}"
    prompts = work / "prompts.jsonl"
    t0 = time.monotonic()
    if not prompts.exists():
        shutil.rmtree(work, ignore_errors=True)
        write_prompts(prompts, n)
    row: dict[str, Any] = {"prompts": n, "finished": n - new, "shards": shards}
    for src in trees.values():
        out = work / out_name(src, shards)  # one per tree: each reads its own format
        if not (out / "manifest.json").exists():
            shutil.rmtree(out, ignore_errors=True)
            synthesize_with(src, prompts, out, n - new, shards)
    row["setup_s"] = round(time.monotonic() - t0, 1)
    for name, src in trees.items():
        print(f"== {n:,} prompts, {name} ==", flush=True)
        row[name] = resume_once(src, prompts, work / out_name(src, shards), timeout, shards)
        print(f"   {row[name]}", flush=True)
    return row


def out_name(src: Path, shards: int) -> str:
    return f"out-{src.parent.name}" + (f"-{shards}-shards" if shards > 1 else "")


def synthesize_with(src: Path, prompts: Path, out: Path, finished: int, shards: int) -> None:
    """`synthesize_output` in a child that imports regen from `src`."""
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "from synthetic_output import synthesize_output;"
        "synthesize_output(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), 20_000, 0,"
        " int(sys.argv[5]))"
    )
    env = {**os.environ, "PYTHONPATH": str(src)}
    here = str(Path(__file__).parent)
    args = [sys.executable, "-c", code, here, str(prompts), str(out), str(finished), str(shards)]
    subprocess.run(args, env=env, check=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--new", type=int, default=2_000, help="prompts left to generate")
    parser.add_argument("--baseline", default="61ae85c", help="git ref of today's code")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument(
        "--shards", type=int, default=1, help="the output of N parts; part 0 of N resumes"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    trees = {f"baseline {args.baseline}": baseline_tree(args.baseline), "this tree": ROOT / "src"}
    results: dict[str, Any] = {"command": " ".join(sys.argv), "machine": machine(), "rows": []}
    for n in args.sizes:
        results["rows"].append(bench_size(n, args.new, trees, args.timeout, args.shards))
    print(f"\n{'prompts':>12} {'tree':<22} {'peak RSS MB':>12} {'first request s':>16}")
    for row in results["rows"]:
        for name in trees:
            r = row[name]
            print(
                f"{row['prompts']:>12,} {name:<22} {r['peak_rss_mb']:>12} "
                f"{r['first_request_s']:>16}"
            )
    name = "scale.json" if args.shards == 1 else f"scale-{args.shards}-shards.json"
    (BENCH_DIR / name).write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {BENCH_DIR / name}")


if __name__ == "__main__":
    main()
