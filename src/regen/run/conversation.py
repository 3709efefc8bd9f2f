"""One work item, start to finish: the request(s) for a (prompt, sample) and its output line.

With `--regenerate-turns all`, every assistant turn is regenerated in order, each request
carrying the regenerated history, reasoning included: the server's chat template decides
what of it the target sees (Qwen3-family templates keep the reasoning of the turns after the
last user message, the tool loop of the current turn). A regenerated turn that calls tools is
answered as `tool_turns` decides, and a trace whose calls went elsewhere than the dataset's
ends there by default: it is never stored with tool results that answer no call in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from regen.fleet.dispatch import Fleet
from regen.fleet.engine import UNKNOWN, EngineInfo
from regen.fleet.engine_defaults import neutral_fields
from regen.fleet.response import Generated, combined_spec_decoding, parse_chat_response
from regen.fleet.roles import roles_sent
from regen.records import Completion, RecordMeta, TokenIds, Usage, WorkItem
from regen.run.config import Sampling
from regen.run.tool_server import ToolServer
from regen.run.tool_turns import MAX_AGENT_STEPS, Answered, Answers, answer_calls
from regen.tool_trace import calls_match, calls_of, leading_results, with_call_ids


@dataclass(frozen=True)
class RequestShape:
    """What every request of a run shares."""

    model: str
    regenerate_turns: Literal["last", "all"] = "last"
    return_token_ids: bool = False
    tool_divergence: Literal["end", "splice"] = "end"
    logprobs: bool = False


@dataclass
class Conversation:
    history: list[dict] = field(default_factory=list)
    turns: list[dict] = field(default_factory=list)
    attempts: int = 0
    latency: float = 0.0
    last: Generated | None = None
    engine: EngineInfo = UNKNOWN  # of the server that gave the last answer
    max_tokens_lowered_to: int | None = None  # the context left no room for max_tokens


def turn_ends(messages: list[dict], mode: str) -> list[int]:
    """Where each regenerated answer goes: at the end, and (mode all) at each old answer."""
    ends = [len(messages)]
    if mode == "all":
        ends = [i for i, m in enumerate(messages) if m["role"] == "assistant"] + ends
    return ends


async def regenerate(
    fleet: Fleet,
    item: WorkItem,
    shape: RequestShape,
    sampling: Sampling,
    tool_server: ToolServer | None = None,
) -> Conversation:
    source = item.prompt.messages
    conv = Conversation()
    start = 0
    for end in turn_ends(source, shape.regenerate_turns):
        conv.history.extend(source[start:end])
        original = source[end] if end < len(source) else None
        cached = leading_results(source, end + 1)  # what answered the original's calls
        start = end + 1 + len(cached)
        for step in range(MAX_AGENT_STEPS):
            generated = await _ask(fleet, conv, shape, sampling, item)
            turn = conv.turns[-1]
            first = step == 0  # later steps: the target answering its own tool results
            old = calls_of(original) if first else []
            if original is not None and first:
                turn["tool_calls_match"] = calls_match(generated.tool_calls or [], old)
            if not first:
                turn["agent_step"] = step
            answers = Answers(cached if first else [], old, first and original is not None)
            outcome = await answer_calls(
                generated,
                answers,
                divergence=shape.tool_divergence,
                tool_server=tool_server,
                conversation_id=_conversation_id(item),
                turn=len(conv.history) - 1,
            )
            if outcome.ended is None and outcome.results and step == MAX_AGENT_STEPS - 1:
                outcome = Answered([], "agent_steps")  # the target never stopped calling
            if outcome.ended is not None:
                turn["trace_ended"] = outcome.ended
                return conv
            if not outcome.results:
                break
            turn["tool_results"] = outcome.by
            conv.history.extend(outcome.results)
            if old:
                break  # the dataset's own next turn is the one that answers the results
    return conv


def _conversation_id(item: WorkItem) -> str:
    return f"{item.prompt.id}#{item.sample}"


async def _ask(
    fleet: Fleet, conv: Conversation, shape: RequestShape, sampling: Sampling, item: WorkItem
) -> Generated:
    """One request on the history so far; its answer joins the history and `conv.turns`."""
    body = request_body(shape, conv.history, item.prompt.tools, sampling, item.sample)
    done = await fleet.complete(body)
    generated = parse_chat_response(done.data, done.server.name)
    if generated.tool_calls:  # a server that names no call ids: results must name their call
        generated.tool_calls = with_call_ids(generated.tool_calls, len(conv.history))
    done.server.stats.record_success(
        done.latency, generated.completion_tokens or 0, generated.prompt_tokens or 0
    )
    done.server.stats.record_spec(generated.spec_decoding)
    conv.history.append(generated.assistant_message())
    conv.attempts += done.attempts
    conv.latency += done.latency
    conv.last = generated
    conv.engine = done.server.engine
    conv.max_tokens_lowered_to = done.max_tokens_lowered_to or conv.max_tokens_lowered_to
    turn: dict[str, Any] = {
        "server": done.server.url,
        "finish_reason": generated.finish_reason,
        "usage": {
            "prompt_tokens": generated.prompt_tokens or 0,
            "completion_tokens": generated.completion_tokens or 0,
        },
    }
    if generated.spec_decoding is not None:
        turn["speculative_decoding"] = generated.spec_decoding
    conv.turns.append(turn)
    return generated


def request_body(
    shape: RequestShape,
    history: list[dict],
    tools: list[dict] | None,
    sampling: Sampling,
    sample: int,
) -> dict[str, Any]:
    """The chat request. Assistant messages keep their `reasoning_content`: each server
    renames it to the field its engine reads (fleet/history_fields.py)."""
    body: dict[str, Any] = {"model": shape.model, "messages": list(history), "stream": False}
    body.update(sampling.request_fields(sample))
    if tools:
        body["tools"] = tools
    if shape.return_token_ids:
        body["return_token_ids"] = True
    if shape.logprobs:  # top_logprobs 0: llama-cpp-python returns none without the field
        body["logprobs"], body["top_logprobs"] = True, 0
    return body


def recorded_sampling(sampling: Sampling, sample: int, engine: EngineInfo) -> dict[str, Any]:
    """`meta.sampling`: as asked, None for "the server's default", and under `neutral` what
    regen sent in place of the engine's own defaults (llama.cpp's; see engine_defaults)."""
    asked = sampling.as_dict()
    neutral = neutral_fields(engine.name, sampling.request_fields(sample))
    return {**asked, "neutral": neutral} if neutral else asked


def _recorded_turns(turns: list[dict]) -> list[dict] | None:
    """`meta.turns`: with more than one request, or whenever a turn says how its tool calls
    went (a trace that ended at its first turn still says why)."""
    if len(turns) > 1 or any("tool_calls_match" in t or "trace_ended" in t for t in turns):
        return turns
    return None


def completion_record(
    item: WorkItem, conv: Conversation, shape: RequestShape, sampling: Sampling
) -> Completion:
    """The completions/ line of a finished conversation."""
    prompt, last = item.prompt, conv.last
    assert last is not None
    token_ids = None
    if last.completion_token_ids is not None:
        token_ids = TokenIds(last.prompt_token_ids, last.completion_token_ids)
    usage = Usage(*(sum(t["usage"][k] for t in conv.turns) for k in Usage.__struct_fields__))
    meta = RecordMeta(
        server=conv.turns[-1]["server"],
        model=shape.model,
        sampling=recorded_sampling(sampling, item.sample, conv.engine),
        attempts=conv.attempts,
        latency_s=round(conv.latency, 3),
        line=prompt.line,
        turns=_recorded_turns(conv.turns),
        engine=conv.engine.as_dict(),
        max_tokens_lowered_to=conv.max_tokens_lowered_to,
        # only when a seed was sent: SGLang ignores it unless it runs deterministic
        seed_honoured=conv.engine.seed_honoured if sampling.seed is not None else None,
        # every regenerated turn is trained on: its acceptance counts, not only the last's
        speculative_decoding=combined_spec_decoding(
            [t.get("speculative_decoding") for t in conv.turns]
        ),
        roles_sent=roles_sent(conv.engine.name, conv.history),
    )
    return Completion(
        id=prompt.id,
        sample=item.sample,
        messages=conv.history,
        tools=prompt.tools or None,
        finish_reason=last.finish_reason,
        usage=usage,
        source=prompt.source,
        category=prompt.category,
        token_ids=token_ids,
        logprobs=last.logprobs,
        meta=meta,
    )
