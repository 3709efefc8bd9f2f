"""`regen check PROMPTS.jsonl`: the tool traces of a prompt file, before any run.

A prompt file has no answers to tokenise, so of the verdict's rules only `broken_trace`
applies: a tool result whose id answers no call of the assistant turn before it, a call left
without a result before the conversation goes on (or at the end of a prompt that ends on
its results), and call arguments that are not JSON. Counted per source, with per-sample flags.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from regen.inputs import read_prompts
from regen.jsonio import dumps_line
from regen.records import Prompt, source_name
from regen.tool_trace import trace_faults

RULE = "broken_trace"
EXAMPLES = 10


@dataclass
class TraceReport:
    path: str
    max_fraction: float | None = 0.0
    prompts: int = 0
    unreadable: int = 0  # lines that are no prompt at all (generate would put them in errors/)
    per_source: Counter = field(default_factory=Counter)
    broken: Counter = field(default_factory=Counter)  # source -> prompts with a broken trace
    kinds: Counter = field(default_factory=Counter)  # fault kind -> prompts
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def fraction(self) -> float:
        return sum(self.broken.values()) / self.prompts if self.prompts else 0.0

    @property
    def passed(self) -> bool:
        return self.max_fraction is None or self.fraction <= self.max_fraction

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": "pass" if self.passed else "fail",
            "prompt_file": self.path,
            "rule": RULE,
            "max_fraction": self.max_fraction,
            "fraction": self.fraction,
            "prompts": self.prompts,
            "unreadable_lines": self.unreadable,
            "broken": sum(self.broken.values()),
            "kinds": dict(self.kinds),
            "sources": {
                s: {"prompts": n, "broken": self.broken[s]}
                for s, n in sorted(self.per_source.items())
            },
            "examples": self.examples,
        }

    def lines(self) -> list[str]:
        mark = "PASS" if self.passed else "FAIL"
        limit = "off" if self.max_fraction is None else f"{self.max_fraction:.2%}"
        head = (
            f"prompt file {self.path}: {self.prompts} prompts, {self.unreadable} unreadable "
            "lines (only the tool-trace rule applies before a run)"
        )
        broken = sum(self.broken.values())
        rule = f"  {mark} {RULE:<23} {self.fraction:7.2%} (max {limit})  {broken}/{self.prompts}"
        out = [head, rule]
        if self.kinds:
            out.append("  kinds: " + ", ".join(f"{k} {v}" for k, v in self.kinds.most_common()))
        for source, n in sorted(self.per_source.items()):
            out.append(f"  source {source:<24} {self.broken[source]} of {n} broken")
        for ex in self.examples:
            out.append(f"  e.g. line {ex['line']} ({ex['id']}): {', '.join(ex['flags'])}")
        return [*out, "", f"verdict: {mark}"]


def check_prompt_traces(
    path: str | Path, max_fraction: float | None = 0.0, per_sample: IO[bytes] | None = None
) -> TraceReport:
    report = TraceReport(str(path), max_fraction)
    for entry in read_prompts(path):
        if not isinstance(entry, Prompt):
            report.unreadable += 1
            continue
        source = source_name(entry.source)
        report.prompts += 1
        report.per_source[source] += 1
        faults = trace_faults(entry.messages, open_at_end=False)
        flags = [*faults, RULE] if faults else []
        if per_sample is not None:
            per_sample.write(dumps_line({"id": entry.id, "line": entry.line, "flags": flags}))
        if faults:
            report.broken[source] += 1
            report.kinds.update(faults)
            if len(report.examples) < EXAMPLES:
                report.examples.append({"id": entry.id, "line": entry.line, "flags": flags})
    return report
