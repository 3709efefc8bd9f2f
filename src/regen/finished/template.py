"""Named checks of the chat template, each a question asked of one rendered sample.

A template can look fine and still train a bad drafter: it drops the reasoning of the final
turn, it has no generation prompt (so the assistant header is supervised), it renders no tool
calls, or its end-of-turn
is not a special token (so the drafter never learns to stop). These are found by rendering
with the real tokenizer, never by the model's name. The mask code (mask.py) only measures;
the verdicts are here.
"""

from __future__ import annotations

import re

from regen.finished.mask import Encoded
from regen.finished.record import Completion
from regen.finished.render import Rendered

INLINE_OPENER = re.compile(r"<(think|thinking|reasoning)>")


def no_generation_prompt(generation_prompt: str) -> bool:
    """`add_generation_prompt=True` adds nothing: the assistant header would be supervised."""
    return not generation_prompt.strip()


def unterminated_turn(enc: Encoded) -> bool:
    """A supervised turn does not end on a special token: the stop is never learned."""
    return enc.unterminated > 0


def reasoning_dropped(completion: Completion, rendered: Rendered) -> bool:
    """The final turn has reasoning, but the render of that turn does not contain it."""
    reasoning = completion.reasoning.strip()
    if not reasoning:
        return False
    final = rendered.final
    return final is None or reasoning not in rendered.text[final.own_from : final.own_to]


def tools_dropped(completion: Completion, rendered: Rendered) -> bool:
    """The final turn calls tools, but its render does not name them: a template without a
    tool-call slot (SmolLM2's) trains the drafter on the text around calls it never sees."""
    calls = completion.final.get("tool_calls") or []
    names = [(c.get("function") or {}).get("name") for c in calls if isinstance(c, dict)]
    if not names:
        return False
    final = rendered.final
    turn = rendered.text[final.own_from : final.own_to] if final is not None else ""
    return not all(isinstance(n, str) and n in turn for n in names)


def double_reasoning(completion: Completion, rendered: Rendered) -> bool:
    """The answer carries its reasoning inline (`<think>...` in content, from a server without
    a reasoning parser) and the template adds its own block: two think blocks in one turn."""
    match = INLINE_OPENER.search(completion.answer)
    final = rendered.final
    if match is None or final is None:
        return False
    tag = match.group(0)
    turn = rendered.text[final.generated_from : final.own_to]
    return turn.count(tag) > completion.answer.count(tag)


def template_flags(
    completion: Completion, rendered: Rendered, enc: Encoded, generation_prompt: str
) -> tuple[str, ...]:
    checks = {
        "no_generation_prompt": no_generation_prompt(generation_prompt),
        "unterminated_turn": unterminated_turn(enc),
        "reasoning_dropped": reasoning_dropped(completion, rendered),
        "tools_dropped": tools_dropped(completion, rendered),
        "double_reasoning": double_reasoning(completion, rendered),
    }
    return tuple(name for name, hit in checks.items() if hit)
