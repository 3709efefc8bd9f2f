"""Score the same held-out rows twice, the target (and every checkpoint) at two placements,
and report the difference: `--device cuda --dtype bfloat16` against `--against cpu` in
float32 by default (issue 55 item 7); `--device cpu` runs the same check on the CPU alone
(bf16 against float32), the twin that needs no GPU.

    PYTHONPATH=src:bench python scripts/gpu_check.py --device cuda [--prompts 8 --max-new 48]

For each drafter (a draft model, an EAGLE-3 head, a DFlash drafter: bench/scale_fixtures.py)
and category: tau(3) at both placements and the relative difference (the check: within 2%
overall); for the target itself, how many answer positions change their top-1 token between
the placements, and how many of those were near-ties at the reference (top-1 and top-2
logits closer than NEAR_TIE). Writes the JSON to --out and prints it; exits 1 when a drafter's
overall tau moved by more than 2%.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NEAR_TIE = 0.1  # logits (nats) between top-1 and top-2: a bf16 rounding can swap them
WITHIN = 0.02  # the claim checked: tau in bf16 within 2% of float32


def placement(device: str, dtype: str) -> Any:
    from regen.score.checkpoints.placement import Placement

    return Placement(device, dtype, 8192).resolved()


def score_at(run: Path, folders: dict[str, Path], where: Any, out: Path) -> dict[str, Any]:
    """tau(3) per drafter and category, the target's top-1 and margins over the answers,
    and the hidden-state pass's cost, with the target and checkpoints at `where`."""
    import checkfix

    from regen.check import Encoder
    from regen.score import ScoreSettings, score_run
    from regen.score.drafts import CheckpointSettings, open_drafts
    from regen.score.rows import Selection
    from scale_fixtures import target

    settings = ScoreSettings(Selection("category", None, 0), [3], "embedded")
    checkpoint = CheckpointSettings(str(target()), 8, where)
    began = time.perf_counter()
    with open_drafts([str(f) for f in folders.values()], [], "vllm", 2, checkpoint=checkpoint) as d:
        report = score_run(run, d, Encoder.of(checkfix.load("smol")), settings, out).to_json()
        shared = next(x.shared for x in d if getattr(x, "shared", None) is not None)
        top = target_top2(shared, run)
        cost = shared.cost
    taus = {
        draft["name"]: {g: v["by_k"][0]["tau"]["value"] for g, v in draft["groups"].items()}
        for draft in report["drafts"]
    }
    return {
        "placement": where.label,
        "tau3": taus,
        "top2": top,
        "target_pass_s_per_1000_tokens": round(1000 * cost.seconds / max(cost.tokens, 1), 3),
        "wall_s": round(time.perf_counter() - began, 1),
    }


def target_top2(shared: Any, run: Path) -> list[tuple[int, float]]:
    """Per answer position of every row: the target's top-1 token and its lead over top-2."""
    import torch

    from drafter_helpers import stored_rows
    from regen.score.checkpoints.target_pass import FINAL

    head = shared.model.get_output_embeddings()
    out = []
    for _, ids, start in stored_rows(run):
        final = shared.capture([ids])[0][FINAL][start - 1 : len(ids) - 1]
        with torch.no_grad():
            best = head(final.to(head.weight.device)).float().topk(2, dim=-1)
        for (v1, v2), i in zip(best.values.tolist(), best.indices[:, 0].tolist(), strict=True):
            out.append((i, v1 - v2))
    return out


def compare(checked: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    drafters = {}
    for name, groups in reference["tau3"].items():
        ours = checked["tau3"][name]
        drafters[name] = {
            g: {
                "reference": ref,
                "checked": ours[g],
                "relative": None if not ref else round((ours[g] - ref) / ref, 4),
            }
            for g, ref in groups.items()
        }
    flips = [
        lead for (a, lead), (b, _) in zip(reference["top2"], checked["top2"], strict=True) if a != b
    ]
    return {
        "drafters_tau3": drafters,
        "target_top1": {
            "positions": len(reference["top2"]),
            "changed": len(flips),
            "changed_near_ties": sum(lead < NEAR_TIE for lead in flips),
            "near_tie_below": NEAR_TIE,
        },
        "within_2pct": all(
            abs(d["(overall)"]["relative"] or 0.0) <= WITHIN for d in drafters.values()
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="the placement checked")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--against", default="cpu", help="the reference device (float32)")
    parser.add_argument("--prompts", type=int, default=8, help="per category (3 categories)")
    parser.add_argument("--max-new", type=int, default=48)
    parser.add_argument("--work", type=Path, help="where the run and drafters are cached")
    parser.add_argument("--out", type=Path, default=Path(".bench/gpu_check.json"))
    args = parser.parse_args()
    from scale_fixtures import drafters, held_out_run

    work = args.work or Path(tempfile.mkdtemp(prefix="regen-gpu-check-"))
    run = held_out_run(work, args.prompts, args.max_new)
    folders = drafters(work, run)
    checked_at, reference_at = (
        placement(args.device, args.dtype),
        placement(args.against, "float32"),
    )
    reference = score_at(run, folders, reference_at, work / "score-reference")
    checked = score_at(run, folders, checked_at, work / "score-checked")
    result = {
        "checked": {k: v for k, v in checked.items() if k != "top2"},
        "reference": {k: v for k, v in reference.items() if k != "top2"},
        **compare(checked, reference),
        "rows": 3 * args.prompts,
        "max_new": args.max_new,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0 if result["within_2pct"] else 1


if __name__ == "__main__":
    sys.exit(main())
