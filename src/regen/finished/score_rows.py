"""Reading `regen score`'s per-row results (score/results.py writes them): what export's
`--max-acceptance` and `--order hard-first` select by, and what score re-aggregates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from regen.errors import ConfigError

ROWS = "rows.jsonl"


def read_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete line of a rows file (streamed: 100K rows need not fit in memory)."""
    if not path.exists():
        return
    with open(path, "rb") as fh:
        for raw in fh:
            if raw.endswith(b"\n"):
                yield orjson.loads(raw)


def draft_rows_file(score_json: Path, name: str | None, flag: str) -> tuple[str, Path]:
    """The draft named `name` in a score.json (else its first one) and its rows file."""
    try:
        drafts = orjson.loads(score_json.read_bytes())["drafts"]
        chosen = next((d for d in drafts if d["name"] == name), drafts[0])
        rows_file = Path(chosen["rows_file"])
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ConfigError(
            f"{flag} {score_json}: not a score.json written by `regen score` ({exc})",
            hint="run `regen score RUN --draft ...` first; it writes RUN/score/score.json",
        ) from exc
    beside = score_json.parent / rows_file.parent.name / rows_file.name
    if not rows_file.exists() and beside.exists():
        rows_file = beside  # the score folder was moved or fetched: its layout is the same
    if not rows_file.exists():
        raise ConfigError(f"{flag} {score_json}: its per-row results {rows_file} are gone")
    return str(chosen["name"]), rows_file
