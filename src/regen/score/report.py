"""Pool the per-row results into the report: per group and overall, per draft."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.finished.record import key_of, sample_label
from regen.finished.score_rows import read_rows
from regen.score.chain import Chain
from regen.score.outcome import Accept, from_line
from regen.score.rows import Selection
from regen.score.tally import Tally
from regen.score.tokens import TEACHER_FORCED

OVERALL = "(overall)"
# a tau(k) from fewer verify steps than this is marked: a handful of steps (an n-gram draft
# that finds a match four times in 999 tokens) gives a figure no one should go by
FEW_STEPS = 30
RETOKENIZED_NOTE = (
    "{n} of {of} rows were re-tokenised from their text with the target's tokenizer and chat "
    "template (the run stored no token ids): re-tokenised text can differ from the tokens the "
    "model produced; generate with --return-token-ids to score the exact tokens"
)

LENGTH_NOTE = (
    "{n} of {of} re-tokenised rows have another number of answer tokens than the engine "
    "counted (usage.completion_tokens), so their text tokenises into other tokens than the "
    "model drew (e.g. {e}; the field `length_differs` in {rows} holds the engine's count)"
)


@dataclass
class DraftScore:
    name: str
    identity: dict[str, Any]
    rows_file: Path
    scored_now: int  # rows this call scored (the rest were in the results file already)
    groups: dict[str, Tally] = field(default_factory=dict)
    skipped: Counter = field(default_factory=Counter)
    skipped_examples: dict[str, str] = field(default_factory=dict)  # kind -> one row's message
    retokenized: int = 0
    length_differs: list[str] = field(default_factory=list)  # rows (labels): RowsFile field
    baseline: dict[str, Any] | None = None  # paired before/after, with --baseline
    compared: dict[str, Any] | None = None  # against the reference draft, with --compare
    earlier: bool = False  # scored by an earlier `regen score`, kept in the report
    # --from-engine: per group, the sums vLLM's /metrics keeps over the same answers
    engine_counters: dict[str, dict[str, int]] | None = None
    temperatures: set = field(default_factory=set)  # the answers were drawn at (None: unknown)
    sampling_draft: int = 0  # rows scored as a draft sampling from its q (not its argmax)
    teacher_forced: int = 0  # of those, rows whose p came from the target's pass (--target-model)

    def estimate(self) -> dict[str, Any]:
        """Which estimate the figures are: `greedy` when every answer scored was drawn at
        temperature 0, else `sampled`, at the temperature(s) the answers were drawn at; none
        (null) when no row was scored: no figure to qualify."""
        if not self.temperatures:
            return {"estimate": None, "temperature": None, "draft_sampling": None}
        temps = sorted(self.temperatures, key=lambda t: (t is None, t or 0.0))
        sampled = any(t != 0 for t in temps)
        return {
            "estimate": "sampled" if sampled else "greedy",
            "temperature": temps[0] if len(temps) == 1 else (temps or None),
            "draft_sampling": "probabilistic" if self.sampling_draft else "greedy",
        }

    def to_json(self, ks: list[int]) -> dict[str, Any]:
        return {
            "name": self.name,
            **self.estimate(),
            "identity": self.identity,
            "rows_file": str(self.rows_file),
            "scored_now": self.scored_now,
            "earlier": self.earlier,
            "retokenized_rows": self.retokenized,
            "length_differs_rows": len(self.length_differs),
            "skipped": dict(self.skipped),
            "skipped_examples": self.skipped_examples,
            "groups": {g: _tally_json(t, ks) for g, t in self.groups.items()},
            "baseline": self.baseline,
            **({"compared": self.compared} if self.compared else {}),
            **({"engine_counters": self.engine_counters} if self.engine_counters else {}),
            **(
                {"target_probabilities": self.target_probabilities()}
                if "target" in self.identity
                else {}
            ),
        }

    def target_probabilities(self) -> dict[str, Any]:
        """Where the target's p of the sampling draft's rows came from (target_probs.py)."""
        return {
            "teacher_forced": {"target": self.identity["target"], "rows": self.teacher_forced},
            "engine_logprobs": {"rows": self.sampling_draft - self.teacher_forced},
        }


def _tally_json(tally: Tally, ks: list[int]) -> dict[str, Any]:
    data = tally.to_json()
    data["by_k"] = [
        {**at, "few_steps": at["verify_steps"] < FEW_STEPS} for at in data["by_k"] if at["k"] in ks
    ]
    return data


@dataclass
class ScoreReport:
    run: str
    by: str
    ks: list[int]
    sample: int | None
    seed: int
    drafts: list[DraftScore]
    invalid_records: dict[str, int]
    # which side of the held-out split was scored, and how it was drawn (rows.Selection)
    split: dict[str, Any] = field(default_factory=lambda: {"split": "all", "holdout": None})
    # the file and line of the first lines that are not JSON (run_state.lines_not_json)
    invalid_lines: list[dict[str, Any]] = field(default_factory=list)

    @property
    def notes(self) -> list[str]:
        out = []
        for d in self.drafts:
            rows = d.groups[OVERALL].rows if OVERALL in d.groups else 0
            if d.retokenized:
                out.append(f"{d.name}: " + RETOKENIZED_NOTE.format(n=d.retokenized, of=rows))
            if d.length_differs:
                examples = ", ".join(d.length_differs[:3])
                out.append(
                    f"{d.name}: "
                    + LENGTH_NOTE.format(
                        n=len(d.length_differs), of=d.retokenized, e=examples, rows=d.rows_file
                    )
                )
        return out

    def attach_baseline(self, path: Path) -> None:
        """Pair every draft's rows with an earlier score's (same rows, same tokens)."""
        from regen.score.compare import baseline_rows, paired

        for draft in (d for d in self.drafts if not d.earlier):
            name, before = baseline_rows(path, draft.name)
            groups = paired(draft.rows_file, before, self.by, self.ks)
            draft.baseline = {"file": str(path), "draft": name, "groups": groups}

    def attach_comparison(self) -> None:
        """Every draft scored now against the last one named (the reference), paired by row
        (gap.py): the difference per group, depth and position, and where the gap is."""
        from regen.score.gap import against, reference_rows

        now = [d for d in self.drafts if not d.earlier]
        if len(now) < 2:
            raise ConfigError(
                "--compare needs two drafts or more: yours, then the reference",
                hint="pass --draft OURS --draft REFERENCE --compare",
            )
        reference = now[-1]
        outcomes = reference_rows(reference.rows_file)
        for draft in now[:-1]:
            draft.compared = against(draft.rows_file, outcomes, reference.name, self.by, self.ks)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "by": self.by,
            "k": self.ks,
            "few_steps_below": FEW_STEPS,
            "sample_per_group": self.sample,
            "seed": self.seed,
            **self.split,
            "drafts": [d.to_json(self.ks) for d in self.drafts],
            "invalid_records": self.invalid_records,
            "invalid_lines": self.invalid_lines,
            "notes": self.notes,
        }


def pool(
    run: str, drafts: list[DraftScore], selection: Selection, ks: list[int], invalid: dict[str, int]
) -> ScoreReport:
    """Re-read each draft's results file (streamed) and tally the rows of this selection."""
    k_max = max(ks)
    for draft in drafts:
        overall = draft.groups.setdefault(OVERALL, Tally(k_max))
        for line in read_rows(draft.rows_file):
            if not selection.wants(key_of(line)):
                continue
            if "skipped" in line:
                draft.skipped[line["skipped"]] += 1
                draft.skipped_examples.setdefault(line["skipped"], line.get("message", ""))
                continue
            group = line["groups"].get(selection.by, "(none)")
            outcome = from_line(line)
            draft.groups.setdefault(group, Tally(k_max)).add(outcome)
            overall.add(outcome)
            draft.retokenized += bool(line["retokenized"])
            if "length_differs" in line:
                draft.length_differs.append(sample_label(*key_of(line)))
            draft.temperatures.add(line.get("temperature", 0.0))  # older rows: greedy only
            draft.sampling_draft += isinstance(outcome, Accept | Chain)
            draft.teacher_forced += line.get("target_probs") == TEACHER_FORCED
        draft.groups = dict(sorted(draft.groups.items(), key=lambda kv: (kv[0] == OVERALL, kv[0])))
    return ScoreReport(
        run,
        selection.by,
        ks=ks,
        sample=selection.per_group,
        seed=selection.seed,
        drafts=drafts,
        invalid_records=invalid,
        split=selection.split_json(),
    )
