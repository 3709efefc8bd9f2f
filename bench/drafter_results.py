"""The rounds of bench_drafter.py and what it prints: every training set at seed 0, then again
at further seeds where a lever's difference from its baseline is not clear, every drafter
scored on the held-out answers, and the tables and verdicts read from the scores."""

from __future__ import annotations

import json
from pathlib import Path

import drafter_report as report
import drafter_train as training
from drafter_levers import SETS
from drafter_matrix import Matrix

HOT_SETS = ("default", "t07", "mix", "two-samples")  # also scored on the 0.7 held-out answers
INIT = "init"  # the untrained layer-skip draft: where every drafter starts


def run(matrix: Matrix, kinds: tuple[str, ...], sets: list[str], seeds: int) -> dict:
    trained = {(kind, name, 0): matrix.train(kind, name, 0) for kind in kinds for name in sets}
    entries = collect(matrix, trained)
    for seed in range(1, seeds):
        close = [
            (e["kind"], e["set"])
            for e in entries
            if e["held"] == "held-t0" and e["set"] != e["baseline"] and e["seed"] == seed - 1
            if report.verdict([e["vs"]]) == "no clear difference"
        ]
        if not close:
            break
        for kind, name in close:
            for which in (name, SETS[name].baseline):
                if (kind, which, seed) not in trained:
                    trained[(kind, which, seed)] = matrix.train(kind, which, seed)
        entries = collect(matrix, trained)
    return {"entries": entries, "verdicts": verdicts(entries), "notes": notes(matrix)}


def collect(matrix: Matrix, trained: dict) -> list[dict]:
    """Score every drafter not yet scored and read every figure back."""
    folders = {key: matrix.draft_folder(*key) for key in trained}
    init = matrix.work / "drafts" / "layer-skip-init"
    if not (init / "config.json").is_file():
        training.save_init(matrix.target, init, training.Budget(tokens=0).blocks)
    helds = ["held-t0"] + (["held-t07"] if any(k[1] in HOT_SETS[1:] for k in trained) else [])
    entries = []
    for held in helds:
        wanted = {k: f for k, f in folders.items() if held == "held-t0" or k[1] in HOT_SETS}
        got = matrix.score(held, [init, *wanted.values()])
        entries.append(_init_entry(got[init.name], held))
        for (kind, name, seed), folder in wanted.items():
            base = SETS[name].baseline
            theirs = wanted.get((kind, base, seed)) or wanted.get((kind, base, 0))
            entries.append(
                _entry(kind, name, seed, held, trained[(kind, name, seed)], got, folder, theirs)
            )
    return entries


def _entry(kind, name, seed, held, training_info, got, folder: Path, theirs) -> dict:
    ours = got[folder.name]
    other = got[theirs.name]["rows"] if theirs is not None else {}
    groups = sorted(ours["groups"])
    return {
        "kind": kind,
        "set": name,
        "seed": seed,
        "held": held,
        "baseline": SETS[name].baseline,
        "training": training_info,
        "groups": ours["groups"],
        "vs": report.paired_difference(ours["rows"], other, None),
        "vs_by_group": {
            g: report.paired_difference(ours["rows"], other, g) for g in groups if g[0] != "("
        },
    }


def _init_entry(got: dict, held: str) -> dict:
    nothing = {"rows": 0, "prompts": 0, "steps": 0, "passes": 0.0}
    return {
        "kind": "layer-skip",
        "set": INIT,
        "seed": 0,
        "held": held,
        "baseline": INIT,
        "training": nothing,
        "groups": got["groups"],
        "vs": {"rows": 0},
    }


def verdicts(entries: list[dict]) -> list[dict]:
    """Per drafter kind, held-out set and training set: the verdict over its seeds."""
    keyed: dict[tuple, list[dict]] = {}
    for e in entries:
        if e["set"] not in (e["baseline"], INIT):
            keyed.setdefault((e["kind"], e["held"], e["set"], e["baseline"]), []).append(e)
    return [
        {
            "kind": kind,
            "held": held,
            "set": name,
            "baseline": base,
            "seeds": [e["seed"] for e in group],
            "diffs": [report.diff_cell(e["vs"]) for e in group],
            "verdict": report.verdict([e["vs"] for e in group]),
        }
        for (kind, held, name, base), group in keyed.items()
    ]


def notes(matrix: Matrix) -> list[str]:
    said = []
    for recipe in sorted((matrix.work / "prompts").glob("lacks-*.yaml")):
        said.append(f"{recipe.name}:\n" + "\n".join(_comments(recipe)))
    return said


def _comments(recipe: Path) -> list[str]:
    return [line for line in recipe.read_text().splitlines() if line.startswith("#")]


def save(work: Path, found: dict, k: int) -> str:
    """result.json and table.md in the bench's own folder (never the current one); the
    table's text."""
    (work / "result.json").write_text(json.dumps(found, indent=1))
    text = render(found, k)
    (work / "table.md").write_text(text + "\n")
    return text


def render(found: dict, k: int) -> str:
    out = []
    for held in sorted({e["held"] for e in found["entries"]}):
        mine = [e for e in found["entries"] if e["held"] == held]
        out += [f"\n## on {held} (tau({k}), 95% interval between held-out rows)\n"]
        out.append(report.table(mine, k))
    out.append(f"\n## verdicts (overall tau({k}) against the baseline, paired, every seed)\n")
    for v in found["verdicts"]:
        out.append(
            f"- {v['kind']} on {v['held']}: {v['set']} vs {v['baseline']}: {v['verdict']} "
            f"({'; '.join(f's{s} {d}' for s, d in zip(v['seeds'], v['diffs'], strict=True))})"
        )
    out += report.warnings(found["entries"])
    out += [f"note: {line}" for line in found["notes"]]
    out += [f"not run: {line}" for line in found["not_run"].values()]
    seconds = ", ".join(f"{n} {s / 60:.1f} min" for n, s in found["generate_seconds"].items())
    out.append(
        f"wall time {found['wall_seconds'] / 60:.1f} min (generate now: {seconds or 'none'}); "
        f"load average {found['load_average'][0]:.1f} at the start, "
        f"{found['load_average'][1]:.1f} at the end"
    )
    return "\n".join(out)
