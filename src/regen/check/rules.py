"""The verdict: named rules, each a fraction of samples with a maximum. Any failure -> exit 1."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from regen.check.stats import Group
from regen.errors import ConfigError

EXIT_PASS, EXIT_FAIL = 0, 1


@dataclass(frozen=True)
class Rule:
    name: str
    max_fraction: float
    what: str
    count: Callable[[Group], int]
    of: Callable[[Group], int] = lambda g: g.samples


RULES = (
    Rule("mask_errors", 0.001, "samples whose loss mask could not be built (all-zero, template "
         "error)", lambda g: sum(g.errors.values())),
    Rule("degenerate", 0.05, "mask sum at or below --degenerate-at, or an empty answer",
         lambda g: g.degenerate),
    Rule("empty_answer", 0.02, "final answer empty (no text, no tool call)",
         lambda g: g.empty_answers),
    Rule("missing_reasoning", 0.05, "thinking was on but the reasoning is empty or missing",
         lambda g: g.reasoning_missing, lambda g: g.thinking_on),
    Rule("truncated", 0.10, "finish_reason is length", lambda g: g.truncated),
    Rule("too_long", 0.05, "sequence longer than --max-length tokens", lambda g: g.too_long),
    Rule("duplicate_answers", 0.10, "final answer identical to another sample's",
         lambda g: g.duplicate_answers),
    Rule("short_runs", 0.01, "fewer than --min-run consecutive supervised tokens",
         lambda g: g.short_runs),
    Rule("token_mismatch", 0.01, "re-tokenised final turn differs from the server's token ids",
         lambda g: g.ids_mismatched, lambda g: g.ids_checked),
)  # fmt: skip
RULE_NAMES = tuple(r.name for r in RULES)


@dataclass(frozen=True)
class Outcome:
    rule: str
    what: str
    count: int
    of: int
    fraction: float
    max_fraction: float

    @property
    def passed(self) -> bool:
        return self.fraction <= self.max_fraction


def parse_limits(pairs: tuple[str, ...]) -> dict[str, float | None]:
    """`--max RULE=FRACTION` (or `RULE=off`) into {rule: max or None for off}."""
    limits: dict[str, float | None] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in RULE_NAMES:
            raise ConfigError(
                f"--max {pair}: expected RULE=FRACTION with RULE one of {', '.join(RULE_NAMES)}",
                hint="for example --max truncated=0.2 or --max duplicate_answers=off",
            )
        try:
            limits[name] = None if value == "off" else float(value)
        except ValueError as exc:
            raise ConfigError(f"--max {pair}: {value!r} is not a fraction or 'off'") from exc
    return limits


def judge(overall: Group, limits: dict[str, float | None]) -> list[Outcome]:
    outcomes = []
    for rule in RULES:
        limit = limits.get(rule.name, rule.max_fraction)
        if limit is None or (rule.name == "too_long" and overall.opts.max_length is None):
            continue  # turned off, or nothing to measure against
        count, of = rule.count(overall), rule.of(overall)
        fraction = count / of if of else 0.0
        outcomes.append(Outcome(rule.name, rule.what, count, of, fraction, limit))
    return outcomes
