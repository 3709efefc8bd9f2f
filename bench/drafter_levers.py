"""The levers: which rows each training set of bench_drafter.py reads, and what it is compared
with. Every set is drawn from the pools (drafter_pools.py) through the real verbs: `regen
prepare` for a blend, `regen export` for the rest (`--drop-truncated`, `--max-acceptance X`,
`--order hard-first` with a `regen score` of the pool), so a lever is what a user would get
by turning it.

A set is trained at the same budget of supervised tokens as every other set of its drafter,
from the same init and seed: a set smaller than the budget is reread, one larger is not all
read (each row says how many passes it got).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT = "default"


@dataclass(frozen=True)
class TrainingSet:
    name: str
    baseline: str  # the set it is read against (itself for the default)
    what: str  # one line for the table
    half_budget: bool = False  # the learning curve's lower point


SETS = {
    s.name: s
    for s in (
        TrainingSet(DEFAULT, DEFAULT, "balanced blend, temperature 0, cut rows kept"),
        TrainingSet(
            "default-half", DEFAULT, "the default at half the budget (learning curve)", True
        ),
        TrainingSet(
            "select-drop-easiest-third", DEFAULT, "--max-acceptance at the pool's 2/3 point"
        ),
        TrainingSet(
            "select-keep-hardest-third", DEFAULT, "--max-acceptance at the pool's 1/3 point"
        ),
        TrainingSet("hard-first", DEFAULT, "--order hard-first: each domain's hardest rows"),
        TrainingSet("skewed", DEFAULT, "77% code blend, as the seeds' team's came out"),
        TrainingSet("lacks", DEFAULT, "blend weighted by what the drafter lacks (item 3)"),
        TrainingSet("t07", DEFAULT, "temperature 0.7, one answer a prompt"),
        TrainingSet("mix", DEFAULT, "half the prompts at 0, half at 0.7"),
        TrainingSet(
            "two-samples", "t07", "temperature 0.7, two answers a prompt, half the prompts"
        ),
        TrainingSet(
            "truncated-kept", "truncated-kept", "the pool's finished rows and 30% cut ones"
        ),
        TrainingSet(
            "truncated-dropped", "truncated-kept", "--drop-truncated: the finished rows only"
        ),
        TrainingSet("original", DEFAULT, "another model's answers (Gemma 3 270M, 0.7)"),
    )
}

# one command per lever: the sets it trains (the default always, and what they need)
LEVERS = {
    "selection": (
        "default-half",
        "select-drop-easiest-third",
        "select-keep-hardest-third",
        "hard-first",
    ),
    "blend": ("default-half", "skewed", "lacks"),
    "temperature": ("t07", "mix"),
    "samples": ("t07", "two-samples"),
    "truncated": ("truncated-kept", "truncated-dropped"),
    "original": ("original",),
}
MATRIX = ("selection", "blend", "temperature", "samples", "truncated")  # `--lever matrix`

NOT_RUN = {
    "thinking": "thinking on/off: the target (SmolLM2-135M-Instruct) has no thinking mode, so "
    "there is nothing to turn; a target with one would add a pool per mode"
}


def sets_of(levers: list[str]) -> list[str]:
    """The training sets the levers need, the default first, each once, in a fixed order."""
    unknown = [lever for lever in levers if lever not in LEVERS and lever != "matrix"]
    if unknown:
        raise SystemExit(
            f"--lever {', '.join(unknown)}: no such lever; use one or more of "
            f"{', '.join([*LEVERS, 'matrix'])}"
        )
    wanted = {DEFAULT}
    for lever in levers:
        for name in MATRIX if lever == "matrix" else (lever,):
            wanted.update(LEVERS[name])
    return [name for name in SETS if name in wanted]


def pools_of(sets: list[str]) -> list[str]:
    """The pools the sets draw from, in the order they are generated."""
    need = ["held-t0", "pool-t0"]
    if any(s in sets for s in ("t07", "mix", "two-samples")):
        need += ["t07-two", "t07-one", "held-t07"]
    if "original" in sets:
        need.append("original")
    return need
