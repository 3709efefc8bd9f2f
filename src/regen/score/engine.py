"""`regen score --from-engine`: the serving drafter's acceptance, per group, from what the
engine itself reported for each answer (`meta.speculative_decoding`, recorded by generate from
vLLM's per-request metrics, or from SGLang's counts in the same shape: fleet/sglang_spec.py),
with no draft model at hand.

Each answer's verify steps become a `RowSteps` and are pooled exactly as a draft's simulated
steps are, so the table is `score`'s: tau is tokens per verify step with the bonus token,
1 + accepted / steps, the same ratio as vLLM's mean_acceptance_length and as its /metrics
counters (`vllm:spec_decode_num_accepted_tokens_total` / `..._num_drafts_total`, plus one).
The per-group `engine_counters` are those counters' own sums, to check one against the other.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from regen.errors import ConfigError, InputError
from regen.finished.read import open_run
from regen.finished.record import Completion
from regen.jsonio import atomic_write_bytes
from regen.score.accept import RowSteps
from regen.score.report import OVERALL, DraftScore, ScoreReport
from regen.score.rows import Selection, answer_length, completions, groups_of, pick
from regen.score.sampled import drawn_at
from regen.score.tally import Tally

FOLDER = "engine"
NO_METRICS = "no_engine_metrics"


def row_steps(spec: dict[str, Any]) -> RowSteps:
    """One answer's verify steps from vLLM's `metrics.speculative_decoding`. With the
    `detailed` level each step's drafted count is known (a step near the end of the answer, or
    an n-gram drafter with a short match, drafts fewer than k); with `summary`, only totals."""
    k = int(spec["num_spec_tokens"])
    runs = tuple(int(n) for n in spec["acceptance_histogram"])
    steps, accepted = int(spec["num_spec_steps"]), int(spec["num_accepted_draft_tokens"])
    short = tuple(int(d) for d in spec.get("per_step_drafted") or () if d < k)
    # tokens: what the verify steps emitted, each its accepted drafts plus the bonus token
    return RowSteps(
        k,
        steps + accepted,
        steps=steps,
        drafted=int(spec["num_draft_tokens"]),
        accepted=accepted,
        runs=runs,
        short=short,
    )


def engine_report(run: str | Path, selection: Selection, score_dir: Path) -> ScoreReport:
    store = open_run(run)
    invalid: Counter = Counter()

    def bad(raw: dict, err: InputError) -> None:
        invalid[err.kind] += 1

    selection = pick(store, selection)
    rows = [r for r in completions(store.iter_lines("completions"), bad) if selection.wants(r.key)]
    k = _engine_k(rows, store.where)
    draft = DraftScore(
        f"engine k={k}", {"draft": "engine", "k": k}, score_dir / FOLDER / "rows.jsonl", len(rows)
    )
    lines = _tally(draft, rows, k, selection.by)
    draft.groups = dict(sorted(draft.groups.items(), key=lambda kv: (kv[0] == OVERALL, kv[0])))
    _write_rows(draft.rows_file, lines)
    return ScoreReport(
        str(store.where),
        selection.by,
        ks=[k],
        sample=selection.per_group,
        seed=selection.seed,
        drafts=[draft],
        invalid_records=dict(invalid),
        split=selection.split_json(),
    )


def _tally(draft: DraftScore, rows: list[Completion], k: int, by: str) -> list[dict[str, Any]]:
    """Pool every answer's steps into its group and the overall one; the rows file's lines."""
    counters: dict[str, Counter] = {}
    lines = []
    for completion in rows:
        spec, groups = _spec(completion), groups_of(completion)
        if spec is None or int(spec["num_spec_tokens"]) != k:
            draft.skipped[NO_METRICS if spec is None else "other_k"] += 1
            continue
        steps, tokens = row_steps(spec), answer_length(completion) or 0
        draft.temperatures.add(drawn_at(completion.raw).temperature)
        for group in (groups.get(by) or "(none)", OVERALL):
            draft.groups.setdefault(group, Tally(k)).add_steps(steps, tokens)
            _count(counters.setdefault(group, Counter()), spec)
        lines.append(
            {
                "id": completion.id,
                "sample": completion.sample,
                "groups": groups,
                "speculative_decoding": spec,
            }
        )
    order = sorted(counters, key=lambda g: (g == OVERALL, g))  # as the groups are shown
    draft.engine_counters = {g: dict(counters[g]) for g in order}
    return lines


def _spec(completion: Completion) -> dict[str, Any] | None:
    return spec_of(completion.raw)


def spec_of(raw: dict[str, Any]) -> dict[str, Any] | None:
    """A stored record's engine-reported speculative-decoding counts, if it has them."""
    meta = raw.get("meta")
    spec = meta.get("speculative_decoding") if isinstance(meta, dict) else None
    return spec if isinstance(spec, dict) and "num_spec_tokens" in spec else None


def _engine_k(rows: list[Completion], where: Any) -> int:
    """The draft length the fleet ran with (the most common, if servers differ)."""
    ks = Counter(int(s["num_spec_tokens"]) for s in map(_spec, rows) if s is not None)
    if not ks:
        raise ConfigError(
            f"no answer in {where} carries the engine's speculative-decoding metrics",
            hint="generate against a speculating fleet: vLLM run with --speculative-config and "
            "--per-request-spec-decode-metrics detailed (regen serve --engine vllm passes it), "
            "or SGLang run with --speculative-algorithm (regen asks it for its counts)",
        )
    return ks.most_common(1)[0][0]


def _count(into: Counter, spec: dict[str, Any]) -> None:
    """The sums vLLM's /metrics keeps: drafts (verify steps), draft and accepted tokens, and
    accepted tokens per position (a step that accepted j drafts counts at positions 0..j-1)."""
    into["num_drafts"] += int(spec["num_spec_steps"])
    into["num_draft_tokens"] += int(spec["num_draft_tokens"])
    into["num_accepted_tokens"] += int(spec["num_accepted_draft_tokens"])
    for j, steps in enumerate(spec["acceptance_histogram"]):
        for position in range(j):
            into[f"accepted_at_{position}"] += int(steps)


def _write_rows(path: Path, lines: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, b"".join(orjson.dumps(line) + b"\n" for line in lines))
