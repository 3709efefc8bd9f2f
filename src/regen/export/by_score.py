"""Select and order an export by `regen score`'s per-row results.

`--max-acceptance X` drops the rows whose answer the drafter already predicts (top-1
agreement over the answer above X): training on them teaches the drafter little. `--order
hard-first` writes the rows the drafter predicts worst first. Rows the score did not cover
(a sampled score) are kept, at the end with hard-first, and counted.
"""

from __future__ import annotations

import pickle
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.finished.record import Completion, SampleKey, key_of
from regen.finished.score_place import score_json_of
from regen.finished.score_rows import draft_rows_file, read_rows

ORDERS = ("as-read", "hard-first")


@dataclass
class ScoreSelect:
    acceptance: dict[SampleKey, float]  # (id, sample) -> top-1 agreement over its answer
    source: str
    max_acceptance: float | None = None
    order: str = "as-read"
    dropped: Counter = field(default_factory=Counter)  # category -> rows dropped
    kept: Counter = field(default_factory=Counter)  # category -> rows kept
    unscored: int = 0

    @classmethod
    def requested(
        cls, runs: Any, max_acceptance: float | None, order: str, score_json: Path | None
    ) -> ScoreSelect | None:
        """From export's options; None when none of them asks for a score."""
        if max_acceptance is None and order == "as-read" and score_json is None:
            return None
        found = score_json or score_json_of(runs[0])
        if found is None:
            raise ConfigError(
                f"{runs[0]} has no score yet: --max-acceptance and --order hard-first need one",
                hint=f"run `regen score {runs[0]} --draft ...` first, or pass --score FILE",
            )
        return cls.load(found, max_acceptance, order)

    @classmethod
    def load(cls, score_json: Path, max_acceptance: float | None, order: str) -> ScoreSelect:
        if max_acceptance is not None and not 0 <= max_acceptance <= 1:
            raise ConfigError("--max-acceptance must be between 0 and 1")
        name, rows_file = draft_rows_file(score_json, None, "--score")
        acceptance = {
            key_of(r): r["acceptance"] for r in read_rows(rows_file) if "skipped" not in r
        }
        return cls(acceptance, f"{name} ({rows_file})", max_acceptance, order)

    def reason_to_drop(self, completion: Completion) -> str | None:
        value = self.acceptance.get(completion.key)
        if value is None:
            self.unscored += 1
        elif self.max_acceptance is not None and value > self.max_acceptance:
            self.dropped[completion.category] += 1
            return "above_max_acceptance"
        self.kept[completion.category] += 1
        return None

    def holder(self, folder: Path) -> HeldAside:
        """Where --order hard-first keeps the rows until all are read (a file in `folder`)."""
        return HeldAside(lambda key: self.acceptance.get(key, 2.0), folder)

    def to_json(self) -> dict[str, Any]:
        return {
            "score": self.source,
            "max_acceptance": self.max_acceptance,
            "order": self.order,
            "by_category": {
                c: {"kept": self.kept[c], "dropped": self.dropped[c]}
                for c in sorted(set(self.kept) | set(self.dropped))
            },
            "unscored_rows": self.unscored,
        }


class HeldAside:
    """Kept rows written aside to an unnamed temporary file and read back hardest first.
    Memory holds only (acceptance, read order, offset) per row, not the rows and their
    encodings: a million rows cost tens of MB, not the run's size."""

    def __init__(self, acceptance: Callable[[SampleKey], float], folder: Path) -> None:
        self.acceptance = acceptance
        # open for the object's life, closed by close() (export's finally); never named on disk
        self.file = tempfile.TemporaryFile(dir=folder, prefix=".hard-first-")  # noqa: SIM115
        self.index: list[tuple[float, int, int]] = []

    def add(self, key: SampleKey, item: Any) -> None:
        """`item`: what to give back for the sample `key` (a prepared row)."""
        offset = self.file.tell()
        pickle.dump(item, self.file, protocol=pickle.HIGHEST_PROTOCOL)
        self.index.append((self.acceptance(key), len(self.index), offset))

    def hardest_first(self) -> Iterator[Any]:
        """By acceptance, lowest first; ties and unscored rows (last) in read order."""
        self.index.sort()
        for _, _, offset in self.index:
            self.file.seek(offset)
            yield pickle.load(self.file)  # our own bytes, written above in this process

    def close(self) -> None:
        self.file.close()


def render_by_score(data: dict[str, Any]) -> str:
    parts = ", ".join(
        f"{c} {v['dropped']} of {v['kept'] + v['dropped']}" for c, v in data["by_category"].items()
    )
    return (
        f"by score {data['score']}: dropped above acceptance {data['max_acceptance']}: "
        f"{parts or 'none'}; order {data['order']}; unscored rows {data['unscored_rows']}"
    )
