"""The verdict: named rules, each a fraction of samples with a maximum. Any failure -> exit 1."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from regen.check.composition import Composition
from regen.check.stats import Group
from regen.errors import ConfigError, did_you_mean


@dataclass(frozen=True)
class Rule:
    name: str
    max_fraction: float
    what: str
    count: Callable[[Group], int]
    of: Callable[[Group], int] = lambda g: g.samples


def flag(name: str) -> Callable[[Group], int]:
    return lambda g: g.count(name)


RULES = (
    Rule(
        "mask_errors",
        0.001,
        "samples whose loss mask could not be built (all-zero, template error)",
        lambda g: sum(g.errors.values()),
    ),
    Rule(
        "no_generation_prompt",
        0.0,
        "the template adds no generation prompt, so the assistant header is supervised",
        flag("no_generation_prompt"),
    ),
    Rule(
        "unterminated_turn",
        0.0,
        "a supervised turn does not end on a special end-of-turn "
        "token: the drafter never learns to stop",
        flag("unterminated_turn"),
    ),
    Rule(
        "reasoning_dropped",
        0.0,
        "the template drops the final turn's reasoning: the drafter "
        "never sees what it must predict",
        flag("reasoning_dropped"),
    ),
    Rule(
        "tools_dropped",
        0.0,
        "the template does not render the final turn's tool calls",
        flag("tools_dropped"),
    ),
    Rule(
        "double_reasoning",
        0.0,
        "reasoning inline in the answer (<think> in content) and the "
        "template adds its own block: two think blocks",
        flag("double_reasoning"),
    ),
    Rule(
        "source_turns_supervised",
        0.0,
        "the mask trains assistant turns the target did not "
        "write (they came with the prompt; --supervise all)",
        flag("source_turns_supervised"),
    ),
    Rule(
        "degenerate",
        0.05,
        "an empty answer, or a mask of at most --degenerate-at tokens that "
        "is mostly template tokens (an empty answer wrapped in the template)",
        flag("degenerate"),
    ),
    Rule("empty_answer", 0.02, "final answer empty (no text, no tool call)", flag("empty_answer")),
    Rule(
        "empty_prompt",
        0.0,
        "the user turn answered is empty (or every user turn is): an answer to nothing",
        flag("empty_prompt"),
    ),
    Rule(
        "missing_reasoning",
        0.05,
        "thinking was on but the reasoning is empty or missing",
        flag("missing_reasoning"),
        lambda g: g.thinking_on,
    ),
    Rule("truncated", 0.10, "finish_reason is length", flag("truncated")),
    Rule("too_long", 0.05, "sequence longer than --max-length tokens", flag("too_long")),
    Rule(
        "repetition",
        0.01,
        "the text ends in a loop (its last 4 KB compress below 10%), whatever the finish reason",
        flag("repetition"),
    ),
    Rule(
        "echo_prompt",
        0.01,
        "the answer contains the whole user prompt verbatim",
        flag("echo_prompt"),
    ),
    Rule(
        "echo_system", 0.01, "the answer starts by repeating the system prompt", flag("echo_system")
    ),
    Rule(
        "bad_tool_call",
        0.0,
        "a tool call whose arguments are not a JSON object or whose tool was not offered",
        flag("bad_tool_call"),
    ),
    Rule(
        "broken_trace",
        0.0,
        "a tool message that answers no call of the assistant message "
        "before it, a call left without a result before the next assistant turn, or an earlier "
        "turn's call arguments that are not JSON",
        flag("broken_trace"),
    ),
    Rule(
        "duplicate_answers",
        0.10,
        "reasoning + answer + tool calls identical to another sample's",
        lambda g: g.duplicate_answers,
    ),
    Rule(
        "near_duplicates",
        0.10,
        "answers of 512+ characters sharing their first 256 "
        "with another sample's (not exact copies)",
        lambda g: g.near_duplicates,
    ),
    Rule(
        "short_runs", 0.01, "fewer than --min-run consecutive supervised tokens", flag("short_runs")
    ),
    Rule(
        "token_mismatch",
        0.01,
        "re-tokenised final turn differs from the server's token ids",
        flag("token_mismatch"),
        lambda g: g.ids_checked,
    ),
    Rule(
        "composition_drift",
        0.10,
        "share of prompts that would have to change source (or "
        "category) to match the prompt file's mix (total variation distance)",
        lambda g: 0,
    ),
)
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
        meant = did_you_mean(name, RULE_NAMES) if sep else None
        if meant is None or meant.lower() != name.lower():  # case aside, it must be a rule
            raise _unknown_rule(pair, name, meant, value)
        try:
            limits[meant] = None if value.lower() == "off" else float(value)
        except ValueError as exc:
            raise ConfigError(f"--max {pair}: {value!r} is not a fraction or 'off'") from exc
    return limits


def _unknown_rule(pair: str, name: str, meant: str | None, value: str) -> ConfigError:
    if meant is not None:
        return ConfigError(
            f"--max {pair}: there is no rule {name!r}; did you mean {meant}?",
            hint=f"--max {meant}={value or '0.2'}",
        )
    return ConfigError(
        f"--max {pair}: expected RULE=FRACTION with RULE one of {', '.join(RULE_NAMES)}",
        hint="for example --max truncated=0.2 or --max duplicate_answers=off",
    )


def judge(
    overall: Group, limits: dict[str, float | None], composition: Composition | None = None
) -> list[Outcome]:
    outcomes = []
    no_mix = composition is None or composition.unavailable is not None
    for rule in RULES:
        limit = limits.get(rule.name, rule.max_fraction)
        if limit is None or (rule.name == "too_long" and overall.opts.max_length is None):
            continue  # turned off, or nothing to measure against
        if rule.name == "composition_drift":
            if no_mix:
                continue  # no prompt file to compare with: the report says why
            assert composition is not None
            of = composition.prompts
            fraction = composition.distance
            outcomes.append(
                Outcome(
                    rule.name,
                    rule.what,
                    count=round(fraction * of),
                    of=of,
                    fraction=fraction,
                    max_fraction=limit,
                )
            )
            continue
        count, of = rule.count(overall), rule.of(overall)
        fraction = count / of if of else 0.0
        outcomes.append(
            Outcome(rule.name, rule.what, count=count, of=of, fraction=fraction, max_fraction=limit)
        )
    return outcomes
