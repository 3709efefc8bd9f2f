"""SGLang's per-request speculative-decoding counts, read into vLLM's shape.

`SG:` is `sglang/srt/...` in the SGLang 0.5.23 wheel. When the server speculates, the
tokenizer manager adds to a finished request's `meta_info` (SG:managers/tokenizer_manager.py,
`TokenizerManager._calculate_spec_decoding_metrics`): `spec_verify_ct` (verify steps),
`spec_num_correct_drafts` (accepted draft tokens, no bonus), `spec_num_proposed_drafts`
(= spec_verify_ct x (speculative_num_draft_tokens - 1)), `spec_accept_rate` (correct /
proposed), `spec_accept_length` (completion_tokens / spec_verify_ct: the prefill's token
counted in) and `spec_correct_drafts_histogram` (steps by accepted drafts, index 0.., as
long as the largest count seen: SG:managers/schedule_batch.py,
`Req.update_spec_correct_drafts_histogram`).
The native /generate returns that `meta_info`; the OpenAI chat endpoint returns the same
numbers only when the request asks `return_spec_tokens_details: true`
(SG:entrypoints/openai/protocol.py, `ChatCompletionRequest`), as the response-level
`sglext.spec_tokens_details` (`SpecTokensDetails`, built by
SG:entrypoints/openai/utils.py `spec_tokens_details_from_meta_info`; a list when n > 1).
Streamed, it comes in a chunk of its own with `choices: []`, before the usage chunk
(SG:entrypoints/openai/serving_chat.py, `OpenAIServingChat._generate_chat_stream`); not
streamed, at the top of the response (`OpenAIServingChat._build_chat_response`). A request
with no verify step (nothing speculated) gets none.
"""

from __future__ import annotations

from typing import Any

ASK = "return_spec_tokens_details"


def asking_for_spec_details(engine: str | None, body: dict[str, Any]) -> dict[str, Any]:
    """A chat request to SGLang asks for its acceptance counts; other engines get the body as
    it is (vLLM would log every unknown field)."""
    return {**body, ASK: True} if engine == "sglang" and ASK not in body else body


def spec_from_sglext(data: dict[str, Any]) -> dict[str, Any] | None:
    """vLLM's `metrics.speculative_decoding` fields from SGLang's `sglext.spec_tokens_details`
    (None without them). tau is vLLM's, 1 + accepted / steps; SGLang's own
    `spec_accept_length` (which counts the prefill's token too) is kept beside it."""
    ext = data.get("sglext")
    details = ext.get("spec_tokens_details") if isinstance(ext, dict) else None
    if isinstance(details, list):  # n > 1 (regen sends one request a sample)
        details = details[0] if details else None
    if not isinstance(details, dict):
        return None
    steps = int(details.get("spec_verify_ct") or 0)
    drafted = int(details.get("spec_num_proposed_drafts") or 0)
    accepted = int(details.get("spec_num_correct_drafts") or 0)
    k = drafted // steps if steps else 0
    if k < 1:
        return None
    histogram = [int(n) for n in details.get("spec_correct_drafts_histogram") or []]
    histogram += [0] * (k + 1 - len(histogram))  # SGLang's stops at the largest count seen
    return {
        "mean_acceptance_length": 1.0 + accepted / steps,
        "draft_acceptance_rate": accepted / drafted,
        "acceptance_histogram": histogram,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": k,
        "engine": "sglang",
        "spec_accept_length": details.get("spec_accept_length"),
    }
