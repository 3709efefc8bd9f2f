"""Composition drift: does the run's mix by source match the prompts it was given?

The expected mix is the prompt file's (the path recorded in the run's manifest), over the
prompts the run has attempted: those with a completion or an error. A source whose prompts
mostly errored is then under-represented in the completions, while a run that is still
going (or used `--limit`) is not flagged for the prompts it has not reached yet. Both sides
count prompts, not samples, so `--samples N` does not weigh in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regen.check.record import NO_SOURCE
from regen.inputs import read_prompts
from regen.jsonio import read_json
from regen.records import Prompt
from regen.run.layout import OutputLayout


@dataclass
class Composition:
    prompt_files: list[str] = field(default_factory=list)
    expected: Counter = field(default_factory=Counter)  # source -> prompts attempted
    completed: Counter = field(default_factory=Counter)  # source -> prompts with a completion
    unavailable: str | None = None  # why no comparison was made

    @property
    def distance(self) -> float:
        """Total variation distance: the share of prompts that would have to change source."""
        a, b = sum(self.expected.values()), sum(self.completed.values())
        if not a or not b:
            return 0.0
        names = set(self.expected) | set(self.completed)
        return sum(abs(self.expected[n] / a - self.completed[n] / b) for n in names) / 2

    def to_json(self) -> dict[str, Any]:
        a, b = sum(self.expected.values()) or 1, sum(self.completed.values()) or 1
        return {
            "prompt_files": self.prompt_files,
            "unavailable": self.unavailable,
            "distance": round(self.distance, 4),
            "by_source": {
                n: {"prompts": round(self.expected[n] / a, 4),
                    "completions": round(self.completed[n] / b, 4)}
                for n in sorted(set(self.expected) | set(self.completed))
            },
        }  # fmt: skip


def compare(output_dirs: Iterable[str | Path], completed: dict[str, str]) -> Composition:
    """`completed`: prompt id -> source of every prompt with a completion in the runs."""
    comp = Composition(completed=Counter(completed.values()))
    for output_dir in output_dirs:
        layout = OutputLayout.at(output_dir)
        path = _prompt_file(layout)
        if path is None:
            comp.unavailable = f"{layout.root} has no manifest naming a local prompt file"
            return comp
        comp.prompt_files.append(path)
        errored = {str(r.get("id")) for r in layout.iter_records("errors")}
        for prompt in read_prompts(path):
            if isinstance(prompt, Prompt) and (prompt.id in completed or prompt.id in errored):
                src = prompt.source or {}
                comp.expected[str(src.get("dataset") or NO_SOURCE)] += 1
    return comp


def _prompt_file(layout: OutputLayout) -> str | None:
    if not layout.manifest.is_file():
        return None
    path = (read_json(layout.manifest).get("input") or {}).get("path")
    return path if isinstance(path, str) and Path(path).is_file() else None
