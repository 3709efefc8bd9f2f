"""The rows a drafter trains on: lines of a `regen export --format speculators` folder, read as
speculators reads them (`input_ids` and `loss_mask`), with the prompt id, sample and domain
that let bench_drafter.py draw a lever's rows from a pool."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Row:
    id: str
    sample: int
    domain: str
    line: str  # the export's own line, written as it is for speculators' prepare-data
    supervised: int  # tokens with a loss: the mask's ones after the first position

    @property
    def pair(self) -> tuple[list[int], list[int]]:
        row = json.loads(self.line)
        return list(row["input_ids"]), list(row["loss_mask"])


def read_export(export: Path, split: str = "train") -> list[Row]:
    """Every row of one split, domain by domain (data/<domain>/<split>-*.jsonl), in the
    export's own order (which `--order hard-first` sets), rows with no loss left out."""
    rows = []
    for path in sorted((export / "data").glob(f"*/{split}-*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            fields = json.loads(line)
            supervised = sum(fields["loss_mask"][1:])  # position 0 predicts nothing
            if supervised:
                rows.append(
                    Row(
                        str(fields["id"]), int(fields["sample"]), path.parent.name, line, supervised
                    )
                )
    if not rows:
        raise SystemExit(f"{export}: no {split} rows with a supervised token")
    return rows


def of_prompts(rows: Iterable[Row], ids: Iterable[str]) -> list[Row]:
    wanted = set(ids)
    return [r for r in rows if r.id in wanted]


def prompt_ids(prompt_file: Path) -> list[str]:
    return [json.loads(line)["id"] for line in prompt_file.read_text().splitlines() if line]


def up_to(rows: Sequence[Row], tokens: int) -> list[Row]:
    """The first rows, in order, whose supervised tokens reach `tokens`: what a trainer that
    reads the file in order and stops at the budget sees."""
    taken, spent = [], 0
    for row in rows:
        if spent >= tokens:
            break
        taken.append(row)
        spent += row.supervised
    return taken


def write_jsonl(rows: Sequence[Row], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.line + "\n" for r in rows))
    return path


def describe(rows: Sequence[Row]) -> dict:
    """What a training set is made of: rows, prompts, supervised tokens, rows per domain."""
    domains: dict[str, int] = {}
    for r in rows:
        domains[r.domain] = domains.get(r.domain, 0) + 1
    return {
        "rows": len(rows),
        "prompts": len({r.id for r in rows}),
        "supervised_tokens": sum(r.supervised for r in rows),
        "by_domain": dict(sorted(domains.items())),
    }
