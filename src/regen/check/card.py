"""check's verdict as export's dataset card carries it: each exported row judged as `regen
check` judges a sample, folded by one `Tally` under the given rule limits. Export sees it as
a `regen.finished.verdict.Judge`, handed in by the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regen.check.sample import SampleResult, result_of
from regen.check.stats import StatOptions
from regen.check.tally import Tally
from regen.finished.encode import Encoder
from regen.finished.mask import Encoded
from regen.finished.record import Completion


@dataclass(frozen=True)
class CardCheck:
    """The rule limits (`check --limit`); picklable, for export's workers."""

    limits: dict[str, float | None]

    def judge(
        self, completion: Completion, enc: Encoded, specials: frozenset[int], degenerate_at: int
    ) -> SampleResult:
        return result_of(completion, enc, specials, degenerate_at, enc.flags)

    def verdict(self, degenerate_at: int) -> CardTally:
        return CardTally(
            Tally(StatOptions(degenerate_at=degenerate_at), per_sample=None), self.limits
        )


@dataclass
class CardTally:
    tally: Tally
    limits: dict[str, float | None]

    def add(self, result: SampleResult) -> None:
        self.tally.add(result)

    def report(self, encoder: Encoder, output_dirs: list[str | Path]) -> dict[str, Any]:
        return self.tally.report(encoder, self.limits, output_dirs).to_json()
