"""The per-row results file: one JSON line per scored row, appended as rows finish.

It is the resume ledger (a score that stops goes on from the rows it has, never rescoring
one), the input of the report (re-aggregated from it, so `--k` and `--by` need no rescoring)
and what `regen export --max-acceptance` selects by. One folder per draft and token source:
`score/<draft>-<hash>/rows.jsonl` beside a `draft.json` naming them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from regen.errors import OutputError
from regen.finished.record import SampleKey, key_of
from regen.finished.score_rows import ROWS, read_rows
from regen.score.outcome import Lookup, Outcome, hits_of, steps_of, to_fields, tokens_of
from regen.score.tokens import TokenRow

TAU_K = 8  # per-row tau is kept for k = 1..8: enough for export to select at any usual k


def folder_for(score_dir: Path, name: str, identity: dict[str, Any]) -> Path:
    digest = hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return score_dir / f"{_safe(name)}-{digest[:8]}"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:48] or "draft"


def row_line(row: TokenRow, outcome: Outcome) -> dict[str, Any]:
    """A scored row: its figures, what they hold for (the temperature the answer was drawn at)
    and the outcome itself, from which any k is replayed."""
    n = tokens_of(outcome)
    match = outcome.match() if isinstance(outcome, Lookup) else outcome
    miss = match.find("0") if isinstance(match, str) else -1  # a sampling draft has no miss
    return {
        "id": row.id,
        "sample": row.sample,
        "groups": row.groups,
        "tokens": n,
        "retokenized": row.retokenized,
        "temperature": row.drawn.temperature,
        "acceptance": round(hits_of(outcome) / n, 4) if n else None,
        "first_miss": miss if miss >= 0 else None,
        "tau": [round(steps_of(outcome, k).tau, 4) for k in range(1, TAU_K + 1)],
        **to_fields(outcome),
        **({"target_probs": row.target_probs} if row.target_probs else {}),
        **({"length_differs": row.engine_tokens} if row.length_differs else {}),
    }


def skipped_line(key: SampleKey, groups: dict[str, str], kind: str, message: str) -> dict[str, Any]:
    return {"id": key[0], "sample": key[1], "groups": groups, "skipped": kind, "message": message}


class RowsFile:
    """Append-only; a line cut short by a kill is dropped on the next open."""

    def __init__(self, folder: Path, identity: dict[str, Any]) -> None:
        self.folder = folder
        self.path = folder / ROWS
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "draft.json").write_bytes(orjson.dumps(identity, option=orjson.OPT_INDENT_2))
            self._cut_partial_line()
        except OSError as exc:
            raise OutputError.writing(folder, exc) from exc
        self._fh: IO[bytes] | None = None

    def done(self) -> set[SampleKey]:
        """The (id, sample) of every row already scored (also in a file an earlier regen
        wrote with `"id": "ID#SAMPLE"`, so a resumed score goes on from it)."""
        return {key_of(line) for line in self.lines()}

    def lines(self) -> Iterator[dict[str, Any]]:
        yield from read_rows(self.path)

    def append(self, line: dict[str, Any]) -> None:
        try:
            if self._fh is None:
                self._fh = open(self.path, "ab")  # noqa: SIM115 (held open while scoring)
            self._fh.write(orjson.dumps(line) + b"\n")
            self._fh.flush()  # a kill loses at most the row being written
        except OSError as exc:
            raise OutputError.writing(self.folder, exc) from exc

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _cut_partial_line(self) -> None:
        """Read backwards from the end to the last newline (the file can be large)."""
        if not self.path.exists():
            return
        with open(self.path, "r+b") as fh:
            end = fh.seek(0, 2)
            pos = end
            while pos > 0:
                step = min(pos, 1 << 16)
                fh.seek(pos - step)
                at = fh.read(step).rfind(b"\n")
                if at >= 0:
                    pos = pos - step + at + 1
                    break
                pos -= step
            if pos < end:
                fh.truncate(pos)
