"""`regen score`: how many tokens a drafter would accept on a run's answers, per domain.

One teacher-forced pass of a draft over prompt + answer gives, per answer token, whether the
draft's greedy guess is the target's token; under greedy verification that is the exact
outcome of speculative decoding at any draft length k (see accept.py).

Modules:
    accept.py      the maths on match vectors: tau(k), rates, per position, run histograms
    outcome.py     what a draft found on one row; tally.py folds a group's outcomes
    rows.py        which rows (all, or N per group, seeded) and their groups
    tokens.py      the tokens scored: stored ids, or tokenised as `check` does
    drafts.py      what a draft is; ngram.py, llama_draft.py, fleet_draft.py the three kinds
                   `--draft` names directly; checkpoints/: a folder, which is a draft model,
                   an EAGLE-3 head or a DFlash drafter, and the target's hidden states the
                   heads read
    vocab.py       a draft must share the target's vocabulary
    sampled.py     acceptance at the answers' temperature, from the target's p and the draft's q
    target_probs.py  p from the target's own pass (--target-model), when the run kept none;
                   llama_target_pass.py decodes the rows side by side, as the server did
    results.py     the per-row results file: the resume ledger and export's input
    report.py      pooled per group; table.py renders it; compare.py pairs two scores
    runner.py      the library entry point
    place.py       where RUN/score lives: beside the run, in a local dir or a bucket
"""

from regen.finished.score_place import score_folder, score_json_of, score_where
from regen.score.runner import ScoreSettings, score_run, write_report

__all__ = [
    "ScoreSettings",
    "score_folder",
    "score_json_of",
    "score_run",
    "score_where",
    "write_report",
]
