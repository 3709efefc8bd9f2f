"""What a verb that writes a finished run out asks of `regen check`'s verdict, as a protocol.

`regen export` writes the dataset card's check over the rows it exports, judged as `regen
check` judges them, from the same encodings. The verdict is check's (check/card.py); export
is handed it by the layer above (the CLI), so export imports nothing of check. A `Judge`
goes to export's workers with the rest of the job: it must pickle (a frozen dataclass does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from regen.finished.encode import Encoder
from regen.finished.mask import Encoded
from regen.finished.record import Completion


class Verdict(Protocol):
    """The fold over the judged samples, in read order, and the report it ends in."""

    def add(self, result: Any) -> None: ...

    def report(self, encoder: Encoder, output_dirs: list[str | Path]) -> dict[str, Any]: ...


class Judge(Protocol):
    """One sample's judgement (in any worker) and the fold that gives the verdict."""

    def judge(
        self, completion: Completion, enc: Encoded, specials: frozenset[int], degenerate_at: int
    ) -> Any: ...

    def verdict(self, degenerate_at: int) -> Verdict: ...
