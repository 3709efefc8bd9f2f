"""Everything check learns about one completion, in one small record (kept for every sample).

`flags` here names the template and content checks the sample fails; with the facts kept
here `stats.sample_flags` adds every other per-sample rule (see rules.py). The `--per-sample`
file's `flags` are all of them, so it says why each sample was counted, and `--show` picks
its examples from the same names.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from regen.check.content import answer_key, content_flags, prefix_key
from regen.finished.mask import Encoded, is_degenerate
from regen.finished.record import Completion, Ids, same_ids

PREFIX_CHARS = 40


@dataclass(frozen=True)
class SampleResult:
    id: str  # the prompt's id as given
    sample: int  # which sample of that prompt
    source: str
    category: str
    finish_reason: str
    thinking: str
    answer_empty: bool
    reasoning_missing: bool
    answer_hash: int
    prefix_hash: int | None
    answer_prefix: str
    flags: tuple[str, ...] = ()
    error: str | None = None  # InputError.kind when the sample could not be encoded
    message: str | None = None
    n_tokens: int = 0
    mask_sum: int = 0
    longest_run: int = 0
    output_tokens: int = 0
    own_tokens: int = 0  # tokens of the final turn's own text (not template-inserted)
    degenerate: bool = True  # see is_degenerate; an unusable sample is never healthy
    ids_match: bool | None = None  # None: the line carries no token ids

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def describe(completion: Completion) -> dict[str, Any]:
    """The facts that need no tokenizer."""
    answer = completion.answer.strip()
    return {
        "id": completion.id,
        "sample": completion.sample,
        "source": completion.source,
        "category": completion.category,
        "finish_reason": completion.finish_reason,
        "thinking": completion.thinking,
        "answer_empty": not answer and not completion.has_tool_calls,
        "reasoning_missing": completion.thinking == "on" and not completion.reasoning.strip(),
        "answer_hash": answer_key(completion),
        "prefix_hash": prefix_key(completion),
        "answer_prefix": " ".join(answer[: PREFIX_CHARS * 2].split())[:PREFIX_CHARS],
    }


def result_of(
    completion: Completion,
    enc: Encoded,
    specials: frozenset[int],
    degenerate_at: int,
    template_flags: tuple[str, ...] = (),
    stored_agree: bool | None = None,
) -> SampleResult:
    """`stored_agree`: whether the sample built from its stored ids equals this one (None
    when the stored ids do not cover it: then the final turn is compared with them)."""
    start, end = enc.final_generated
    own_start, own_end = enc.final_own
    facts = describe(completion)
    matched = stored_agree
    if matched is None and enc.stored:
        matched = True  # the final turn is the stored ids themselves
    elif matched is None:
        matched = ids_match(enc.input_ids[start:end], completion.completion_ids, specials)
    return SampleResult(
        **facts,
        degenerate=is_degenerate(facts["answer_empty"], enc, degenerate_at),
        flags=template_flags + content_flags(completion),
        n_tokens=len(enc.input_ids),
        mask_sum=enc.mask_sum,
        longest_run=enc.longest_run,
        # as the engine counted it (a cap of 256 reads 256), not the templated span, which
        # adds the turn's closing tokens; re-tokenised only where the row does not say
        output_tokens=_answer_tokens(completion, own_end - own_start),
        own_tokens=own_end - own_start,
        ids_match=matched,
    )


def _answer_tokens(completion: Completion, re_tokenised: int) -> int:
    counted = completion.final_answer_tokens
    return re_tokenised if counted is None else counted


def failed(completion: Completion, kind: str, message: str) -> SampleResult:
    return SampleResult(
        **describe(completion), flags=content_flags(completion), error=kind, message=message
    )


def ids_match(ours: Ids, server: Ids | None, specials: frozenset[int]) -> bool | None:
    """Does the re-tokenised final turn equal the server's completion ids?

    Servers differ on whether the stop token is part of the completion ids, so one trailing
    end-of-turn token on either side is not a mismatch.
    """
    if server is None:
        return None
    if same_ids(ours, server):
        return True
    if len(ours) and ours[-1] in specials and same_ids(ours[:-1], server):
        return True
    return bool(len(server)) and server[-1] in specials and same_ids(server[:-1], ours)


def invalid(raw: Any, err: Exception) -> SampleResult:
    """A line that is not a usable completion at all (no messages, no assistant turn)."""
    raw = raw if isinstance(raw, dict) else {}
    return SampleResult(
        id=str(raw.get("id")),
        sample=raw["sample"] if isinstance(raw.get("sample"), int) else 0,
        source=Completion({"messages": [], **raw}).source,
        category=Completion({"messages": [], **raw}).category,
        finish_reason=str(raw.get("finish_reason") or "unknown"),
        thinking="auto",
        answer_empty=True,
        reasoning_missing=False,
        answer_hash=0,
        prefix_hash=None,
        answer_prefix="",
        error=getattr(err, "kind", "invalid_record"),
        message=str(err),
    )
