"""Rows a draft could not score: why, how many, and what to change so that they are scored.

A skipped row is counted with its reason in the rows file (`"skipped": KIND` and the row's own
`message`), never lost. The report says how many were skipped of how many chosen, by reason,
with one row's message as the example and the fix for that reason. A draft that scored no
row at all has no figure to give (least of all a greedy one): `require_scored` makes that a
failure, exit 3, as an input file that cannot be used at all is for `generate`.
"""

from __future__ import annotations

from typing import Any

from regen.errors import InputFileError
from regen.score.report import OVERALL

ARGMAX_INSTEAD = "or generate without --logprobs: the draft's argmax is then scored on the answers"

FIXES = {
    "logprobs_not_drawn": (
        "score the run as it is with --target-model embedded (answers of the embedded model) "
        "or --target-model TARGET.gguf: the target's own pass gives the probabilities of the "
        "draw at any temperature, top-k and top-p; or generate where the logprobs are those "
        "of the draw: the embedded llama.cpp "
        "(llama-cpp-python) returns the raw model's, which are the drawn ones only at "
        "--temperature 1 with no top-k/top-p; vLLM with --logprobs-mode processed_logprobs "
        "(regen serve adds it); SGLang with no top-k/top-p; always with --temperature set; "
        + ARGMAX_INSTEAD
    ),
    "logprobs_mismatch": (
        "generate with --return-token-ids too (vLLM, SGLang), so that the logprobs line up with "
        "the answer's own tokens, not a re-tokenisation of its text; the embedded llama.cpp "
        "returns no token ids: " + ARGMAX_INSTEAD
    ),
    "too_long": "none with this draft: the rows are longer than its context",
    "empty_answer": "none: the answers render to no tokens (see `regen check`)",
    "server_refused_row": "see the server's answer in the message (a row too long for it?)",
    "no_engine_metrics": "none: the engine reported no acceptance for these answers (a server "
    "that did not speculate, or n > 1)",
    "other_k": "none: these answers were drafted at another k than the table's",
}
OTHER = "see the rows' `message` in the draft's rows.jsonl"


def fix_for(kind: str) -> str:
    return FIXES.get(kind, OTHER)


def skipped_lines(draft: dict[str, Any]) -> list[str]:
    """The report's lines for a draft's skipped rows (score.json's draft): how many of how
    many, and per reason its count, an example and the fix."""
    skipped = draft["skipped"]
    if not skipped:
        return []
    scored = draft["groups"].get(OVERALL, {}).get("rows", 0)
    total = sum(skipped.values())
    out = [f"skipped rows: {total} of {total + scored} not scored, by reason:"]
    for kind, count in sorted(skipped.items()):
        example = draft.get("skipped_examples", {}).get(kind)
        out.append(f"  {kind} {count}" + (f", e.g. {example}" if example else ""))
        out.append(f"    fix: {fix_for(kind)}")
    return out


def require_scored(report: Any) -> None:
    """Raise when a draft scored now has no row scored: its figures would be an empty table
    (a ScoreReport; the drafts an earlier score left are not judged again)."""
    for draft in (d for d in report.drafts if not d.earlier):
        overall = draft.groups.get(OVERALL)
        if overall is not None and overall.rows:
            continue
        if not draft.skipped:
            raise InputFileError(
                f"draft {draft.name} scored no row: the selection holds none",
                hint="score the other side of --holdout (--split), or a run with answers",
            )
        counts = ", ".join(f"{k} {n}" for k, n in sorted(draft.skipped.items()))
        examples = [
            f"{k}: {draft.skipped_examples[k]}"
            for k in sorted(draft.skipped)
            if k in draft.skipped_examples
        ]
        raise InputFileError(
            f"draft {draft.name} scored no row: all {sum(draft.skipped.values())} chosen rows "
            f"were skipped ({counts})"
            + "".join(f"\n  {e}" for e in examples)
            + f"\n  the rows and their reasons: {draft.rows_file}",
            hint="; ".join(f"{k}: {fix_for(k)}" for k in sorted(draft.skipped)),
        )
