"""What follows a regenerated turn that called tools: the results that answer those calls.

Three places a result can come from, in this order: the user's tool server (`--tool-server`,
every call of every regenerated turn: a sandbox with state sees them all, in order); the
dataset's cached results, when the target made the same calls as the dataset's turn (names
and parsed arguments, in order), under the target's new call ids; and with
`--tool-divergence splice`, the cached results under the new ids even where the calls
differ (the trace then holds answers to calls nobody made: an off-policy world, as
speculators builds it). Otherwise a turn whose calls differ ends the trace: it is stored as
the last, supervised turn, and nothing after it is sent or stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from regen.fleet.response import Generated
from regen.run.tool_server import ToolServer
from regen.tool_trace import answered_by, calls_match

MAX_AGENT_STEPS = 16  # turns the target may take on its own tool results before it answers
DIFFER = "tool_calls_differ"  # the target's calls are not the dataset's: its results don't fit
ANSWERED_INSTEAD = "answered_instead_of_calling"  # the dataset called tools, the target did not
UNPAIRED = "cached_results_unpaired"  # the dataset's results do not pair one to one with its calls


@dataclass(frozen=True)
class Answers:
    """What the dataset has for the turn just regenerated."""

    cached: list[dict]  # the tool messages that answered the dataset turn's calls
    old_calls: list[dict]  # the dataset turn's calls
    has_original: bool  # False: a turn past the dataset's (the last, or an agent step)


@dataclass(frozen=True)
class Answered:
    results: list[dict]  # tool messages to append (empty: no call to answer)
    ended: str | None = None  # why the trace ends at this turn
    by: str = ""  # where the results came from: tool_server | cached | spliced


async def answer_calls(
    generated: Generated,
    answers: Answers,
    divergence: str,
    tool_server: ToolServer | None,
    conversation_id: str,
    turn: int,
) -> Answered:
    new = generated.tool_calls or []
    if not new:
        return Answered([], ANSWERED_INSTEAD if answers.old_calls else None)
    if tool_server is not None:
        results = await tool_server.answer_all(conversation_id, turn, new)
        return Answered(results, by="tool_server")
    if not answers.has_original:
        return Answered([])  # nothing the dataset holds answers these calls: the trace ends
    same = calls_match(new, answers.old_calls)
    spliced = answered_by(answers.cached, new)
    if same:
        return Answered(spliced, by="cached") if spliced is not None else Answered([], UNPAIRED)
    if divergence == "splice" and spliced is not None:
        return Answered(spliced, by="spliced")
    return Answered([], DIFFER)
