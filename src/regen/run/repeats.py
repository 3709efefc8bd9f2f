"""A repeated prompt id: the one rule that `regen generate` records and `regen plan` counts.

The first line with an id is the prompt; every later line with the same id is an unusable
line (`duplicate_id` in errors/, one item of the run's count, `regen.run.counts`), whatever
its own content. Both verbs read the input through this, so they count the same file alike.
"""

from __future__ import annotations

import xxhash

from regen.records import BadLine
from regen.run.keyset import KeySet


class IdsSeen:
    def __init__(self) -> None:
        self._keys = KeySet()  # every id read: ~9 bytes each, not ~70 in a set

    def repeat(self, line: int, prompt_id: str, first_was_skipped: bool = False) -> BadLine | None:
        """None for an id's first line; the unusable line for any other. `first_was_skipped`:
        its first line is one a resume passed over unread (generate's intake knows)."""
        first = self._keys.add_new(xxhash.xxh3_64_intdigest(prompt_id.encode()))
        if first and not first_was_skipped:
            return None
        return BadLine(line, "duplicate_id", f"id {prompt_id!r} appears again", prompt_id)
