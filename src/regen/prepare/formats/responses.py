"""Hermes tool results: each <tool_response> block its own tool message, paired with its call.

Hermes Function Calling answers parallel calls (two <tool_call> blocks in one assistant turn)
with one tool turn holding one <tool_response> block per call. A tool message answers one
call, so each block becomes a message of its own, paired with the call it answers: by the
name its payload carries, else in call order. The messages then follow the calls' order, so
a template that reads results by position and one that reads them by id see the same trace.
What cannot be paired is a reject with its reason (`tool_response_not_called`,
`extra_tool_response`); a call left without a response is the trace rule's
`unanswered_tool_call` (`regen.prepare.convert`).
"""

from __future__ import annotations

import re

from regen.errors import InputError
from regen.prepare.tools import parse_payload
from regen.tool_trace import calls_of

BLOCK_RE = re.compile(r"<tool_response>(.*?)</tool_response>", re.S)


def pair_responses(messages: list[dict]) -> list[dict]:
    """`messages` with every tool turn split into one message per <tool_response> block and
    each run of tool messages paired with the calls of the assistant turn just before it."""
    out: list[dict] = []
    run: list[dict] = []
    calls: list[dict] = []
    for message in messages:
        if message["role"] == "tool":
            run += split_responses(message)
            continue
        out += paired(run, calls)
        run = []
        calls = calls_of(message) if message["role"] == "assistant" else []
        out.append(message)
    return out + paired(run, calls)


def split_responses(message: dict) -> list[dict]:
    """One tool message per <tool_response> block, unwrapped, with the `name` its payload
    carries; the message as it is when its text holds no such block. Text outside the blocks
    (a line of prose before them) stays with the nearest block's message: kept, and no
    result of its own to pair."""
    content = message["content"]
    blocks = list(BLOCK_RE.finditer(content)) if isinstance(content, str) else []
    if not blocks:
        return [message]
    if len(blocks) > 1:  # the turn's own id and name cannot stand for several results
        message = {k: v for k, v in message.items() if k not in ("tool_call_id", "name")}
    pieces = []
    for n, block in enumerate(blocks):
        start = 0 if n == 0 else block.start()
        end = blocks[n + 1].start() if n + 1 < len(blocks) else len(content)
        around = (content[start : block.start()], block.group(1), content[block.end() : end])
        piece = {**message, "content": "\n".join(t.strip() for t in around if t.strip())}
        name = _named(block.group(1).strip())
        if name is not None:
            piece.setdefault("name", name)
        pieces.append(piece)
    return pieces


def _named(text: str) -> str | None:
    try:
        payload = parse_payload(text, "tool response")
    except InputError:
        return None  # free-text results are fine as they are; only the name is optional
    name = payload.get("name") if isinstance(payload, dict) else None
    return name if isinstance(name, str) else None


def paired(run: list[dict], calls: list[dict]) -> list[dict]:
    """The tool messages of `run` with the id of the call each answers, in the calls' order.
    Without calls to pair with, the run is left to the trace rule (an orphan result)."""
    if not run or not calls:
        return run
    ids = [str(c.get("id")) for c in calls]
    slots = _slots(run, calls, ids)
    linked = [
        m if s is None else {**m, "tool_call_id": ids[s]} for m, s in zip(run, slots, strict=True)
    ]
    if any(s is None for s in slots):
        return linked  # a stale id: left in place for the trace rule to name
    return [m for _, m in sorted(zip(slots, linked, strict=True), key=lambda p: p[0])]


def _slots(run: list[dict], calls: list[dict], ids: list[str]) -> list[int | None]:
    """The index of the call each result answers: its own id where it names one, else the
    first open call of its name, else the first open call; None for an id of no call."""
    if len(run) > len(calls):  # however they are named: more results than calls
        raise InputError(
            f"{len(run)} tool responses answer {len(calls)} tool call(s) of the assistant "
            "turn before them",
            kind="extra_tool_response",
            hint="remove the extra <tool_response> blocks (one per <tool_call>), or leave the "
            "record out",
        )
    open_calls = list(range(len(calls)))
    slots: list[int | None] = [None] * len(run)
    for n, message in enumerate(run):
        own = message.get("tool_call_id")
        if own in ids and ids.index(own) in open_calls:
            slots[n] = ids.index(own)
            open_calls.remove(ids.index(own))
    for n, message in enumerate(run):  # named results first: they choose their call
        if slots[n] is None and "tool_call_id" not in message and "name" in message:
            slots[n] = _take_named(message["name"], calls, open_calls)
    for n, message in enumerate(run):  # the rest answer the open calls in order
        if slots[n] is None and "tool_call_id" not in message and open_calls:
            slots[n] = open_calls.pop(0)
    return slots


def _take_named(name: str, calls: list[dict], open_calls: list[int]) -> int:
    names = [_call_name(c) for c in calls]
    for i in open_calls:
        if names[i] == name:
            open_calls.remove(i)
            return i
    raise InputError(
        f"a tool response names {name!r}, but the assistant turn before it has no "
        f"unanswered call of that name (it called {', '.join(map(str, names))})",
        kind="tool_response_not_called",
        hint=f"name in each <tool_response> the call it answers ({', '.join(map(str, names))})"
        ", or leave the record out",
    )


def _call_name(call: dict) -> object:
    fn = call.get("function")
    return fn.get("name") if isinstance(fn, dict) else call.get("name")
