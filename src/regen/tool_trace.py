"""Tool calls and the tool messages that answer them: one set of rules for the whole tool.

A trace is whole when every tool message answers (by `tool_call_id`) a call of the assistant
message before it, every call has its result before the next assistant turn, and every call's
arguments are JSON. `prepare` rejects what breaks this, `check` flags it per sample, and a
`--regenerate-turns all` run compares the calls it regenerated with the dataset's (by name and
parsed arguments, in order: ids are random per call and never part of the comparison).
"""

from __future__ import annotations

from typing import Any

import orjson

# What can break a trace, as check's flags and prepare's reject kinds name it.
ORPHAN_RESULT = "orphan_tool_result"  # a tool message that answers no call before it
UNANSWERED_CALL = "unanswered_tool_call"  # a call with no result before the next assistant
BAD_ARGUMENTS = "tool_arguments_not_json"  # call arguments that are not JSON
TRACE_FAULTS = (ORPHAN_RESULT, UNANSWERED_CALL, BAD_ARGUMENTS)
_INVALID = object()


def calls_of(message: dict | None) -> list[dict]:
    calls = (message or {}).get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _function(call: dict) -> dict:
    fn = call.get("function")
    return fn if isinstance(fn, dict) else call


def parsed_arguments(call: dict) -> Any:
    """The call's arguments as data (a JSON string is parsed); _INVALID when not JSON."""
    args = _function(call).get("arguments")
    if not isinstance(args, str):
        return args
    try:
        return orjson.loads(args)
    except orjson.JSONDecodeError:
        return _INVALID


def arguments_as_sent(call: dict) -> Any:
    """The call's arguments as data, or the text the model wrote when it is not JSON."""
    args = parsed_arguments(call)
    return _function(call).get("arguments") if args is _INVALID else args


def _signature(call: dict) -> tuple[Any, bytes]:
    fn, args = _function(call), parsed_arguments(call)
    if args is _INVALID:  # not JSON: only the very same text is the same call
        return fn.get("name"), str(fn.get("arguments")).encode()
    # sorted keys: {"a": 1, "b": 2} and {"b": 2, "a": 1} are the same call
    return fn.get("name"), orjson.dumps(args, option=orjson.OPT_SORT_KEYS)


def calls_match(new: list[dict], old: list[dict]) -> bool | None:
    """Whether two turns made the same calls (names and parsed arguments, in order); None
    when neither called a tool."""
    if not new and not old:
        return None
    return [_signature(c) for c in new] == [_signature(c) for c in old]


def leading_results(messages: list[dict], start: int) -> list[dict]:
    """The tool messages from `start` on, up to the first message of another role."""
    results = []
    for message in messages[start:]:
        if message.get("role") != "tool":
            break
        results.append(message)
    return results


def answered_by(results: list[dict], new_calls: list[dict]) -> list[dict] | None:
    """`results` (answers to another turn's calls, in call order) as answers to `new_calls`:
    the same messages under the new ids. None when they cannot pair one to one."""
    if len(results) != len(new_calls):
        return None
    pairs = zip(results, new_calls, strict=True)
    return [_answering(result, call) for result, call in pairs]


def _answering(result: dict, call: dict) -> dict:
    out = {**result, "tool_call_id": call.get("id")}
    if "name" in result:  # a spliced result answers the new call, under its name
        out["name"] = _function(call).get("name")
    return out


def with_call_ids(calls: list[dict], turn: int) -> list[dict]:
    """`calls` with an id on each (`call_<turn>_<k>` where the server gave none), so that
    every result can name the call it answers."""
    return [c if c.get("id") else {**c, "id": f"call_{turn}_{k}"} for k, c in enumerate(calls)]


def trace_faults(
    messages: list[dict], *, last_arguments: bool = True, open_at_end: bool = True
) -> list[str]:
    """What breaks the pairing of calls and results, in order of appearance (one entry per
    kind); empty for a whole trace. A call still open at the end of the conversation is not a
    fault (`open_at_end`): the trace ends on the turn that made it; a prompt that ends on
    some of its results but not all is. `last_arguments=False` leaves the last assistant
    message's arguments to a check of its own (check's bad_tool_call)."""
    faults: list[str] = []
    open_ids: set[str] = set()
    answerable: set[str] = set()
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            if open_ids:
                faults.append(UNANSWERED_CALL)
            calls = calls_of(message) if last_arguments or i != last else []
            if any(parsed_arguments(c) is _INVALID for c in calls):
                faults.append(BAD_ARGUMENTS)
            answerable = {str(c.get("id")) for c in calls_of(message)}
            open_ids = set(answerable)
        elif role == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id not in answerable:
                faults.append(ORPHAN_RESULT)
            open_ids.discard(call_id)
        elif open_ids and role == "user":
            faults.append(UNANSWERED_CALL)
            open_ids = set()
    if open_ids and not open_at_end and messages and messages[-1].get("role") == "tool":
        faults.append(UNANSWERED_CALL)
    return list(dict.fromkeys(faults))
