"""`check` as a library call: read a run, encode every completion, count, judge."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from regen.check.composition import Composition, compare
from regen.check.encode import Encoder
from regen.check.mask import Encoded
from regen.check.record import Completion
from regen.check.rules import Outcome, judge
from regen.check.sample import SampleResult, failed, invalid, result_of
from regen.check.stats import Group, StatOptions, sample_flags
from regen.errors import ConfigError, InputError
from regen.jsonio import dumps_line
from regen.storage import open_store

ERROR_EXAMPLES = 20


@dataclass
class CheckReport:
    overall: Group
    sources: dict[str, Group]
    outcomes: list[Outcome]
    settings: dict[str, Any]
    error_examples: list[dict] = field(default_factory=list)
    shown: list[tuple[Completion, Encoded, str]] = field(default_factory=list)
    composition: Composition | None = None

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
            "settings": self.settings,
        }


def read_runs(
    output_dirs: Iterable[str | Path], on_row: Callable[[str], None] | None = None
) -> Iterator[dict]:
    """Every finished completion record of one or more `regen generate` output dirs;
    `on_row(run)` is called for each (a progress bar)."""
    for output_dir in output_dirs:
        store = open_store(output_dir)
        if not store.shard_names("completions"):
            raise ConfigError(
                f"no completion shards under {store.where}/completions",
                hint="pass the --output-dir of a `regen generate` run",
            )
        records = store.iter_records("completions")
        if on_row is None:
            yield from records
            continue
        for record in records:
            on_row(str(output_dir))
            yield record


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

    def __post_init__(self) -> None:
        self.overall = Group(self.opts)

    def add(self, result: SampleResult, completion: Completion | None = None,
            enc: Encoded | None = None) -> None:  # fmt: skip
        self.overall.add(result)
        self.sources.setdefault(result.source, Group(self.opts)).add(result)
        if completion is not None:
            self.completed[str(completion.raw.get("id"))] = (result.source, result.category)
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
        if completion is not None and enc is not None and self.show:
            self._keep(result, completion, enc)

    def rules_broken(self, result: SampleResult) -> list[str]:
        """The rules this sample breaks: the per-sample ones, and a repeat of an answer seen
        before (the first of a set of duplicates is not one)."""
        names = list(sample_flags(result, self.opts))
        if not result.answer_empty and self.overall.answers[result.answer_hash] > 1:
            names.append("duplicate_answers")
        return names

    def _keep(self, result: SampleResult, completion: Completion, enc: Encoded) -> None:
        for name in ["(first)", *self.rules_broken(result)]:
            kept = self.failing.setdefault(name, [])
            if len(kept) < self.show:
                kept.append((completion, enc))

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

    def feed(self, completion: Completion, enc: Encoded | InputError, encoder: Encoder) -> None:
        """One encoded completion (or the error that stopped its encoding)."""
        if isinstance(enc, InputError):
            self.add(failed(completion, enc.kind, enc.message), completion)
            return
        result = result_of(completion, enc, encoder.specials, self.opts.degenerate_at, enc.flags)
        self.add(result, completion, enc)

    def report(
        self,
        encoder: Encoder,
        limits: dict[str, float | None],
        output_dirs: Iterable[str | Path] = (),
    ) -> CheckReport:
        """The verdict over everything fed so far."""
        if not self.overall.samples:
            raise ConfigError("no completions to check", hint="is the generate run empty?")
        settings = {"template_tokens": encoder.template_tokens, "supervise": encoder.supervise,
                    **self.opts.__dict__}  # fmt: skip
        dirs = list(output_dirs)
        composition = compare(dirs, self.completed) if dirs else None
        outcomes = judge(self.overall, limits, composition)
        return CheckReport(self.overall, self.sources, outcomes, settings, self.examples,
                           self.shown(outcomes), composition)  # fmt: skip

    def valid(self, records: Iterable[dict]) -> Iterator[Completion]:
        """Completions that can be read; the rest are counted as errors here."""
        for raw in records:
            try:
                yield Completion.of(raw)
            except InputError as err:
                self.add(invalid(raw, err))


def check_completions(
    records: Iterable[dict],
    encoder: Encoder,
    opts: StatOptions,
    limits: dict[str, float | None],
    *,
    show: int = 0,
    per_sample: IO[bytes] | None = None,
    output_dirs: Iterable[str | Path] = (),
) -> CheckReport:
    """`output_dirs`: the runs the records come from, for the composition check."""
    tally = Tally(opts, per_sample, show)
    for completion, enc in encoder.stream(tally.valid(records)):
        tally.feed(completion, enc, encoder)
    return tally.report(encoder, limits, output_dirs)


def check_run(
    output_dirs: Iterable[str | Path],
    encoder: Encoder,
    opts: StatOptions,
    limits: dict[str, float | None],
    *,
    show: int = 0,
    per_sample: Path | None = None,
    on_row: Callable[[str], None] | None = None,
) -> CheckReport:
    """Check one or more generate runs; `per_sample` gets one JSON line per sample."""
    dirs = list(output_dirs)
    records = read_runs(dirs, on_row)
    if per_sample is None:
        return check_completions(records, encoder, opts, limits, show=show, output_dirs=dirs)
    tmp = per_sample.with_name(f".{per_sample.name}.tmp")
    with open(tmp, "wb") as fh:
        report = check_completions(
            records, encoder, opts, limits, show=show, per_sample=fh, output_dirs=dirs
        )
    tmp.replace(per_sample)
    return report
