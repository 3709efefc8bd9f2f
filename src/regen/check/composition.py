"""Composition drift: does the run's mix by source (and category) match its prompts?

The expected mix is the prompt file's (the path recorded in the run's manifest), over the
prompts the run has attempted: those with a completion or an error. A source whose prompts
mostly errored is then under-represented in the completions, while a run that is still
going (or used `--limit`) is not flagged for the prompts it has not reached yet. Both sides
count prompts, not samples, so `--samples N` does not weigh in. Categories are compared the
same way (`meta.category`); the rule takes the larger of the two drifts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regen.inputs import read_prompts
from regen.jsonio import is_file
from regen.records import NO_SOURCE, Prompt, source_name
from regen.storage import Store, open_store


@dataclass
class Mix:
    """Prompts per label (source or category): those attempted, and those completed."""

    expected: Counter = field(default_factory=Counter)
    completed: Counter = field(default_factory=Counter)

    @property
    def distance(self) -> float:
        """Total variation distance: the share of prompts that would have to change label."""
        a, b = sum(self.expected.values()), sum(self.completed.values())
        if not a or not b:
            return 0.0
        names = set(self.expected) | set(self.completed)
        return sum(abs(self.expected[n] / a - self.completed[n] / b) for n in names) / 2

    def shares(self) -> dict[str, dict[str, float]]:
        a, b = sum(self.expected.values()) or 1, sum(self.completed.values()) or 1
        return {
            n: {
                "prompts": round(self.expected[n] / a, 4),
                "completions": round(self.completed[n] / b, 4),
            }
            for n in sorted(set(self.expected) | set(self.completed))
        }


@dataclass
class Composition:
    prompt_files: list[str] = field(default_factory=list)
    source: Mix = field(default_factory=Mix)
    category: Mix = field(default_factory=Mix)
    unavailable: str | None = None  # why no comparison was made

    @property
    def distance(self) -> float:
        """The larger drift of the two mixes."""
        return max(self.source.distance, self.category.distance)

    @property
    def prompts(self) -> int:
        return sum(self.source.completed.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt_files": self.prompt_files,
            "unavailable": self.unavailable,
            "distance": round(self.distance, 4),
            "by_source": self.source.shares(),
            "by_category": self.category.shares(),
        }


def compare(
    output_dirs: Iterable[str | Path], completed: dict[str, tuple[str, str]]
) -> Composition:
    """`completed`: prompt id -> (source, category) of every prompt with a completion."""
    comp = Composition()
    comp.source.completed.update(src for src, _ in completed.values())
    comp.category.completed.update(cat for _, cat in completed.values())
    for output_dir in output_dirs:
        store = open_store(output_dir)
        path, why = _prompt_file(store)
        if path is None:
            comp.unavailable = why
            return comp
        comp.prompt_files.append(path)
        errored = {str(r.get("id")) for r in store.iter_records("errors")}
        for prompt in read_prompts(path):
            if isinstance(prompt, Prompt) and (prompt.id in completed or prompt.id in errored):
                comp.source.expected[source_name(prompt.source)] += 1
                comp.category.expected[str(prompt.category or NO_SOURCE)] += 1
    return comp


def _prompt_file(store: Store) -> tuple[str | None, str]:
    """The run's prompt file, or None and why it cannot be read from here."""
    manifest = store.read_manifest()
    if manifest is None:
        return None, f"{store.where} has no manifest.json naming its prompt file"
    path = (manifest.get("input") or {}).get("path")
    if not isinstance(path, str):
        return None, f"the manifest of {store.where} names no prompt file"
    if not is_file(path):
        where = store.where
        return None, f"the prompt file {path} named in the manifest of {where} is not readable here"
    return path, ""
