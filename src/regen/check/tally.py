"""The fold over every sample's result, in read order: counts per source, the examples, the
samples `--show` prints, and at the end the verdict (`CheckReport`). Results come from any
worker (check/work.py); what depends on all samples (duplicates, counts) is decided here."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from regen.check.composition import Composition, compare
from regen.check.rules import Outcome, judge
from regen.check.sample import SampleResult
from regen.check.stats import Group, StatOptions, sample_flags
from regen.errors import ConfigError
from regen.finished.encode import Encoder
from regen.finished.mask import Encoded
from regen.finished.record import Completion
from regen.finished.run_state import NOT_JSON, lines_not_json, not_finished
from regen.jsonio import dumps_line

ERROR_EXAMPLES = 20
Shown = tuple[Completion, Encoded]
Fetch = Callable[[], Shown | None]  # the sample and its encoding, built only when kept


@dataclass
class CheckReport:
    overall: Group
    sources: dict[str, Group]
    outcomes: list[Outcome]
    settings: dict[str, Any]
    error_examples: list[dict] = field(default_factory=list)
    shown: list[tuple[Completion, Encoded, str]] = field(default_factory=list)
    composition: Composition | None = None
    # lines that are not JSON (not samples: no rule counts them), and the first ones' places
    not_json: dict[str, Any] | None = None
    unfinished: list[dict[str, Any]] = field(default_factory=list)  # runs not whole yet

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outcomes)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": "pass" if self.passed else "fail",
            "failed_rules": [o.rule for o in self.outcomes if not o.passed],
            "rules": [{**o.__dict__, "passed": o.passed} for o in self.outcomes],
            "overall": self.overall.to_json(),
            "sources": {name: g.to_json() for name, g in sorted(self.sources.items())},
            "composition": self.composition.to_json() if self.composition else None,
            "error_examples": self.error_examples,
            "lines_not_json": self.not_json,
            "unfinished_runs": self.unfinished,
            "settings": self.settings,
        }


@dataclass
class Tally:
    opts: StatOptions
    per_sample: IO[bytes] | None
    show: int = 0
    overall: Group = field(init=False)
    sources: dict[str, Group] = field(default_factory=dict)
    examples: list[dict] = field(default_factory=list)
    completed: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> source, category
    # rule -> up to `show` failing samples, so `--show` prints the failures, not the first N
    failing: dict[str, list[tuple[Completion, Encoded]]] = field(default_factory=dict)
    not_json: int = 0  # lines that are not JSON: no sample, so in no rule's count

    def __post_init__(self) -> None:
        self.overall = Group(self.opts)

    def add(
        self, result: SampleResult, fetch: Fetch | None = None, *, readable: bool = True
    ) -> None:
        """One sample's result; `readable`: the line was a completion (the composition counts
        it); `fetch` gives the sample and its encoding if `--show` keeps it. A line that is
        not JSON is no sample: counted apart, and named (file, line) in the report."""
        if result.error == NOT_JSON:
            self.not_json += 1
            return
        self.overall.add(result)
        self.sources.setdefault(result.source, Group(self.opts)).add(result)
        if readable:
            self.completed[result.id] = (result.source, result.category)
        if result.error is not None and len(self.examples) < ERROR_EXAMPLES:
            self.examples.append(
                {
                    "id": result.id,
                    "sample": result.sample,
                    "error": result.error,
                    "message": result.message,
                }
            )
        if self.per_sample is not None:  # every rule it breaks, not only the content checks
            line = {**result.to_json(), "flags": self.rules_broken(result)}
            self.per_sample.write(dumps_line(line))
        if fetch is not None and self.show and result.error is None:
            self._keep(result, fetch)

    def rules_broken(self, result: SampleResult) -> list[str]:
        """The rules this sample breaks: the per-sample ones, and a repeat of an answer seen
        before (the first of a set of duplicates is not one)."""
        names = list(sample_flags(result, self.opts))
        if not result.answer_empty and self.overall.answers[result.answer_hash] > 1:
            names.append("duplicate_answers")
        return names

    def _keep(self, result: SampleResult, fetch: Fetch) -> None:
        wanted = [
            n
            for n in ["(first)", *self.rules_broken(result)]
            if len(self.failing.get(n, [])) < self.show
        ]
        shown = fetch() if wanted else None
        for name in wanted if shown is not None else ():
            self.failing.setdefault(name, []).append(shown)

    def shown(self, outcomes: list[Outcome]) -> list[tuple[Completion, Encoded, str]]:
        """Samples of the failing rules, taken in turn; the first samples when all pass."""
        names = [o.rule for o in outcomes if not o.passed and self.failing.get(o.rule)]
        out: list[tuple[Completion, Encoded, str]] = []
        for rank in range(self.show):
            for name in names or ["(first)"]:
                kept = self.failing.get(name, [])
                if rank < len(kept) and len(out) < self.show:
                    out.append((*kept[rank], name))
        return out

    def report(
        self,
        encoder: Encoder,
        limits: dict[str, float | None],
        output_dirs: Iterable[str | Path] = (),
    ) -> CheckReport:
        """The verdict over everything fed so far."""
        if not self.overall.samples:
            raise ConfigError("no completions to check", hint="is the generate run empty?")
        settings = {
            "template_tokens": encoder.template_tokens,
            "supervise": encoder.supervise,
            **self.opts.__dict__,
        }
        dirs = list(output_dirs)
        composition = compare(dirs, self.completed) if dirs else None
        not_json = None
        if self.not_json:
            not_json = {"count": self.not_json, "first": lines_not_json(dirs)}
        outcomes = judge(self.overall, limits, composition)
        return CheckReport(
            self.overall,
            self.sources,
            outcomes=outcomes,
            settings=settings,
            error_examples=self.examples,
            shown=self.shown(outcomes),
            composition=composition,
            not_json=not_json,
            unfinished=[state for d in dirs if (state := not_finished(d)) is not None],
        )
