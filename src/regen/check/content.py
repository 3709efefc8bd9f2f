"""Named checks of what the model wrote, and the keys that find duplicates.

Each check is one question with no tokenizer involved: a repetition loop, an echo of the
prompt, a tool call a trainer would learn wrongly. Thresholds are module constants, named and
documented in docs/check.md's rule table.
"""

from __future__ import annotations

import zlib

import orjson
import xxhash

from regen.chat import asks_nothing, no_user_text
from regen.finished.record import Completion
from regen.tool_trace import trace_faults

LOOP_MIN_CHARS = 1024  # shorter texts cannot hold a loop worth flagging
LOOP_WINDOW = 4096  # loops run to the end of the text: judge its tail
LOOP_RATIO = 0.10  # compressed/raw below this is a loop (prose ~0.4, code ~0.3)
ECHO_MIN_CHARS = 32  # a prompt shorter than this is often quoted legitimately
ECHO_WORDS = 8  # an echo's candidates: answers holding the prompt's 8 longest words
NEAR_PREFIX = 256  # near-duplicates share this many leading characters...
NEAR_MIN_CHARS = 512  # ...of a text at least this long


def _norm(text: str) -> str:
    return " ".join(text.split())


def words_prefix(text: str, n: int) -> str:
    """`_norm(text)[:n]`, normalising only as much of `text` as that takes (an answer runs to
    tens of thousands of characters; these checks read its first few hundred). The
    normalised head of a text is a prefix of the normalised text, and no longer than it."""
    size = n
    while True:
        head = _norm(text[:size])
        if len(head) >= n or size >= len(text):
            return head[:n]
        size *= 2


def output_text(c: Completion) -> str:
    return f"{c.reasoning}\n{c.answer}".strip()


def repetition(c: Completion) -> bool:
    """The text ends in a loop (a phrase repeated many times), even when finish is `stop`."""
    data = output_text(c).encode()
    if len(data) < LOOP_MIN_CHARS:
        return False
    tail = data[-LOOP_WINDOW:]
    return len(zlib.compress(tail, 6)) / len(tail) < LOOP_RATIO


def _last(c: Completion, role: str) -> str:
    """The last `role` message before the final answer (by position, not by equality)."""
    final = max(i for i, m in enumerate(c.messages) if m.get("role") == "assistant")
    found = (m for m in reversed(c.messages[:final]) if m.get("role") == role)
    content = next(found, {}).get("content")
    return content if isinstance(content, str) else ""


def echo_prompt(c: Completion) -> bool:
    """The answer contains the whole last user message verbatim."""
    prompt = _norm(_last(c, "user"))
    if len(prompt) < ECHO_MIN_CHARS:
        return False
    # each word of the prompt is in the raw answer when the prompt is in the normalised one:
    # a few of its longest words, looked for first, rule most answers out without
    # normalising them
    longest = sorted(set(prompt.split(" ")), key=len, reverse=True)[:ECHO_WORDS]
    return all(word in c.answer for word in longest) and prompt in c.answer_words


def echo_system(c: Completion) -> bool:
    """The answer starts by repeating the system prompt."""
    system = _norm(_last(c, "system"))[:80]
    return len(system) >= ECHO_MIN_CHARS and words_prefix(c.answer, len(system)) == system


def bad_tool_call(c: Completion) -> bool:
    """A final tool call whose arguments are not a JSON object, or names a tool not offered."""
    offered = {(t.get("function") or t).get("name") for t in c.tools or [] if isinstance(t, dict)}
    for call in c.final.get("tool_calls") or []:
        fn = (call.get("function") or {}) if isinstance(call, dict) else {}
        if fn.get("name") not in offered:
            return True
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = orjson.loads(args)
            except orjson.JSONDecodeError:
                return True
        if not isinstance(args, dict):
            return True
    return False


def empty_prompt(c: Completion) -> bool:
    """No user turn has text, or the one the final answer answers is empty: an answer to
    nothing (generate refuses such a prompt now; a run from before it did, or a file written
    by hand, may hold some)."""
    last = max((i for i, m in enumerate(c.messages) if m.get("role") == "assistant"), default=0)
    return no_user_text(c.messages) or asks_nothing(c.messages[:last])


def tool_divergence(c: Completion) -> bool:
    """A regenerated turn made other tool calls than the dataset's (`meta.turns[i].
    tool_calls_match` false): not a fault, a fact counted per source."""
    turns = (c.raw.get("meta") or {}).get("turns") or []
    return any(isinstance(t, dict) and t.get("tool_calls_match") is False for t in turns)


def content_flags(c: Completion) -> tuple[str, ...]:
    checks = {
        "empty_prompt": empty_prompt(c),
        "repetition": repetition(c),
        "echo_prompt": echo_prompt(c),
        "echo_system": echo_system(c),
        "bad_tool_call": bad_tool_call(c),
        "tool_divergence": tool_divergence(c),
    }
    # which ways the trace is broken, and that it is (the final call's arguments: bad_tool_call)
    faults = trace_faults(c.messages, last_arguments=False)
    hits = tuple(name for name, hit in checks.items() if hit)
    return (*hits, *faults, "broken_trace") if faults else hits


def _calls(c: Completion) -> list:
    """Tool calls without their ids: ids are random per call, the call itself is the content."""
    calls = c.final.get("tool_calls") or []
    return [call.get("function", call) if isinstance(call, dict) else call for call in calls]


def answer_key(c: Completion) -> int:
    """Exact duplicates are judged on reasoning + answer + tool calls together: a short final
    answer ("42") after distinct reasoning is not a duplicate, nor are distinct tool calls."""
    key = orjson.dumps([c.reasoning.strip(), c.answer.strip(), _calls(c)])
    return xxhash.xxh64_intdigest(key)


def prefix_key(c: Completion) -> int | None:
    """The hash of a long answer's first characters (near-duplicates), None for short ones."""
    text = words_prefix(c.answer, NEAR_MIN_CHARS)
    if len(text) < NEAR_MIN_CHARS:
        return None
    return xxhash.xxh64_intdigest(text[:NEAR_PREFIX].encode())
