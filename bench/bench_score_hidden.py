"""`bench_score.py hidden`: what the target's hidden-state pass costs (the pass EAGLE-3 and
DFlash checkpoints read, score/checkpoints/target_pass.py), on the embedded SmolLM2-135M as
a Hugging Face model on this machine's CPU, and what two checkpoints side by side cost.

    PYTHONPATH=src:bench .venv/bin/python bench/bench_score.py hidden [--rows 4 --tokens 2600]

pass: rows of `--tokens` tokens (random ids; the cost does not depend on which) through the
target at --max-batch-tokens bounds in increasing order: seconds per 1,000 tokens, and the
peak memory the pass added over the loaded model (the process's peak RSS grows with the
bound, so the growth at each bound, in order, is that bound's peak), in float32 and bf16.
side_by_side: the bench's EAGLE-3 head and DFlash drafter (scale_fixtures.py) scored alone
and together on held-out answers: wall seconds and target forwards.
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BOUNDS = (2600, 5200, 10400)  # padded tokens per forward: 1, 2 and 4 rows of 2,600


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pass_cost(rows: int, tokens: int, dtype: str) -> dict[str, Any]:
    from regen.score.checkpoints.placement import Placement
    from regen.score.checkpoints.target_pass import TargetPass
    from scale_fixtures import LAYERS, target

    rng = random.Random(0)
    seqs = [[rng.randrange(200, 40000) for _ in range(tokens)] for _ in range(rows)]
    placement = Placement("cpu", dtype, BOUNDS[0]).resolved()
    shared = TargetPass(target(), placement, threads=2, what="bench")
    shared.want(LAYERS["dflash"])  # 3 layers, as a DFlash drafter reads them
    shared.capture([seqs[0][:64]])  # warm up: the weights' pages come in on the first pass
    loaded, out = rss_mb(), []
    for bound in BOUNDS:
        shared.placement = Placement("cpu", dtype, bound)
        shared.cost = type(shared.cost)()
        began = time.perf_counter()
        for batch in shared.batches(seqs):
            shared.capture(batch)
        seconds = time.perf_counter() - began
        out.append(
            {
                "max_batch_tokens": bound,
                "rows_per_forward": bound // tokens,
                "forwards": shared.cost.forwards,
                "s_per_1000_tokens": round(1000 * seconds / shared.cost.tokens, 3),
                "peak_mb_over_model": round(rss_mb() - loaded, 1),
            }
        )
    shared.close()
    return {"dtype": dtype, "rows": rows, "tokens_per_row": tokens, "bounds": out}


def side_by_side(per_category: int, max_new: int) -> dict[str, Any]:
    from regen.check import Encoder
    from regen.score import ScoreSettings, score_run
    from regen.score.drafts import CheckpointSettings, open_drafts
    from regen.score.rows import Selection
    from scale_fixtures import drafters, held_out_run, target

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run = held_out_run(root, per_category, max_new)  # puts tests/fixtures/check on the path
        import checkfix

        heads = {k: v for k, v in drafters(root, run).items() if k != "draft-24-blocks"}
        encoder = Encoder.of(checkfix.load("smol"))
        settings = ScoreSettings(Selection("category", None, 0), [3], "embedded")
        checkpoint = CheckpointSettings(str(target()), 8)
        out = {}
        for name, folders in (*((k, [v]) for k, v in heads.items()), ("both", heads.values())):
            began = time.perf_counter()
            with open_drafts([str(f) for f in folders], [], "vllm", 2, checkpoint=checkpoint) as d:
                score_run(run, d, encoder, settings, root / f"score-{name}")
                cost = d[0].shared.cost
            out[name] = {
                "wall_s": round(time.perf_counter() - began, 1),
                "target_forwards": cost.forwards,
                "target_rows": cost.rows,
                "target_pass_s": round(cost.seconds, 2),
            }
        return {"rows": 3 * per_category, "max_new": max_new, **out}


def hidden(rows: int, tokens: int) -> dict[str, Any]:
    """Each dtype's pass in a process of its own (a peak RSS only grows), then the drafters."""
    passes = []
    for dtype in ("float32", "bfloat16"):
        done = subprocess.run(
            [sys.executable, __file__, str(rows), str(tokens), dtype],
            capture_output=True,
            text=True,
            timeout=3600,
            check=True,
        )
        passes.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(passes[-1]), file=sys.stderr, flush=True)  # kept if a later part fails
    return {"pass": passes, "side_by_side": side_by_side(8, 48)}


if __name__ == "__main__":
    print(json.dumps(pass_cost(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])))
