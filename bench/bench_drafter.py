"""Which data makes the better drafter? Every lever regen offers, measured by training the
drafters users train on what it gives and scoring them on held-out target answers (issues 49,
57), end to end on this machine with the real verbs (prepare, generate, export, score).

    PYTHONPATH=src:bench .venv/bin/python bench/bench_drafter.py --lever matrix   # every lever
    ... bench_drafter.py --lever selection      # one lever (and the default it is read against)
    ... bench_drafter.py --lever original       # regen's answers against another model's

Levers (drafter_levers.py): selection by score (`export --max-acceptance` at two points,
`--order hard-first`), blend (77% code, and one weighted by what the drafter lacks:
drafter_blend.py), temperature (0.7, a mix), samples per prompt (two answers to half the
prompts), truncated rows dropped (`export --drop-truncated`); thinking on/off is said, not run
(the target has no thinking mode). Each is read against the default (the balanced blend at
temperature 0, cut rows kept) at the same budget of supervised tokens, init and seed.

Drafters: the layer-skip draft of the target (drafter_train.py) and an EAGLE-3 head trained by
speculators' own trainer on its model class and data path (drafter_eagle3.py). Pools of answers are
generated once and shared by the levers (drafter_pools.py); held-out answers at temperature 0
(and 0.7 for the sampling levers) score every drafter. A lever whose difference from its
baseline is not clear at seed 0 is trained again at further seeds (`--seeds`).

Everything lands in `--work`/<sizes>/: runs, exports, drafts, scores, result.json and
table.md; a rerun resumes (nothing generated or trained twice).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import xxhash

import drafter_levers as levers
import drafter_prompts as prompts
import drafter_results as results
from drafter_matrix import KINDS, Matrix
from drafter_pools import Pools, Sizes


def main() -> None:
    args = parse()
    started, load = time.monotonic(), os.getloadavg()[0]
    sizes = Sizes(args.held, args.pool, args.blend, args.max_tokens, args.seed)
    work = Path(args.work) / runs_key(args, sizes)
    work.mkdir(parents=True, exist_ok=True)
    log = work / "commands.log"
    if args.sources:
        sources = prompts.user_sources(Path(args.sources))
    else:
        sources = prompts.write_sources(work / "sources", sizes.held + sizes.pool, sizes.seed)
    pools = Pools(work, sizes, sources, log)
    sets = levers.sets_of(args.lever)
    for name in levers.pools_of(sets):
        pools.run(name)
    from regen.score.checkpoints.hf_target import embedded_folder

    matrix = Matrix(pools, args.budget, args.k, embedded_folder(), log)
    kinds = KINDS if args.drafter == "both" else (args.drafter,)
    found = results.run(matrix, kinds, sets, args.seeds)
    found["settings"] = vars(args) | {"work": str(work)}
    found["generate_seconds"] = pools.generate_seconds
    found["not_run"] = levers.NOT_RUN
    found["wall_seconds"] = time.monotonic() - started
    found["load_average"] = [load, os.getloadavg()[0]]
    print(results.save(work, found, args.k))
    print(f"\nwritten: {work / 'result.json'} and {work / 'table.md'}")


def runs_key(args: argparse.Namespace, sizes: Sizes) -> str:
    """The folder of this bench's runs: the same prompts and sizes resume what a bench before
    left; other ones (a seed, your own files) get runs of their own, since `regen generate`
    rightly refuses to resume a run from a changed prompt file."""
    key = f"seed{sizes.seed}-h{sizes.held}-p{sizes.pool}-b{sizes.blend}-{sizes.max_tokens}tok"
    if args.sources:
        digest = xxhash.xxh3_64()
        for path in sorted(Path(args.sources).iterdir()):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        key += f"-{digest.hexdigest()[:8]}"
    return key


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--lever",
        action="append",
        default=[],
        help=f"one of {', '.join(levers.LEVERS)}, or matrix (all but original); repeatable",
    )
    p.add_argument("--drafter", choices=(*KINDS, "both"), default="both")
    p.add_argument("--sources", help="your prompts: a folder with one file per domain")
    p.add_argument("--held", type=int, default=40, help="held-out prompts per domain")
    p.add_argument("--pool", type=int, default=200, help="pool prompts per domain")
    p.add_argument("--blend", type=int, default=240, help="prompts of one training blend")
    p.add_argument("--max-tokens", type=int, default=64, help="answer cap, tokens")
    p.add_argument("--budget", type=int, default=16000, help="supervised tokens per drafter")
    p.add_argument("--seeds", type=int, default=2, help="most seeds for a lever that is close")
    p.add_argument("--seed", type=int, default=0, help="of the prompts and their split")
    p.add_argument("--k", type=int, default=3, help="the draft length the table reads")
    p.add_argument(
        "--work",
        default=".bench/drafter",
        help="runs, exports, drafts, scores and the results, in a folder per sizes",
    )
    args = p.parse_args()
    args.lever = args.lever or ["matrix"]
    return args


if __name__ == "__main__":
    main()
