"""vLLM's per-request speculative-decoding metrics, as the fake sends them (and SGLang's,
at the end: `sglang_details`) (`VL:` here is
`vllm/...` in the vLLM 0.32.0 wheel, the first release that sends them).

vLLM 0.32 started with `--per-request-spec-decode-metrics summary|detailed` (and a
`--speculative-config`) answers `metrics.speculative_decoding` for an `n == 1` request
(VL:entrypoints/generate/base/protocol.py:100-129, built by VL:v1/metrics/stats.py:350-422);
without the flag `metrics` is null. Streamed, the metrics ride on the final usage chunk, which
only comes with `stream_options.include_usage` (VL:.../chat_completion/serving.py:860-888).
The first answer token comes from the prefill and is no verify step; each verify step emits
its accepted draft tokens plus one of the target's own (the bonus).
"""

from __future__ import annotations

from typing import Any

# Not streamed, `metrics` also carries the timing fields, null without --enable-per-request-
# metrics; the stream's chunk leaves the nulls out (VL:.../chat_completion/serving.py:871-891).
TIMINGS = dict.fromkeys(
    (
        "time_to_first_token_ms",
        "generation_time_ms",
        "queue_time_ms",
        "mean_itl_ms",
        "tokens_per_second",
    )
)
PATTERN = (1, 0, 2, 3)  # accepted draft tokens per step, cycled (capped at k): a fixed mix


def spec_decoding(tokens: int, k: int, detailed: bool = True) -> dict[str, Any]:
    """The `metrics.speculative_decoding` of an answer of `tokens` tokens at draft length k."""
    accepted, drafted, emitted = [], [], 1  # the prefill's token
    while emitted < tokens:
        a = min(PATTERN[len(accepted) % len(PATTERN)], k, tokens - emitted - 1)
        accepted.append(a)
        drafted.append(k)
        emitted += a + 1
    histogram = [accepted.count(j) for j in range(k + 1)]
    steps, n_accepted, n_drafted = len(accepted), sum(accepted), sum(drafted)
    out: dict[str, Any] = {
        "mean_acceptance_length": 1.0 + n_accepted / steps if steps else 1.0,
        "draft_acceptance_rate": n_accepted / n_drafted if n_drafted else 0.0,
        "acceptance_histogram": histogram,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": n_accepted,
        "num_draft_tokens": n_drafted,
        "num_spec_tokens": k,
    }
    if detailed and steps:  # VL:v1/metrics/stats.py:419-421: only when populated
        out["per_step_accepted"], out["per_step_drafted"] = accepted, drafted
    return out


def sglang_details(tokens: int, k: int) -> dict[str, Any] | None:
    """SGLang 0.5.23's `sglext.spec_tokens_details` for the same answer (every field of its
    `SpecTokensDetails`, SG:entrypoints/openai/protocol.py; the values as
    SG:managers/tokenizer_manager.py `_calculate_spec_decoding_metrics` computes them, with
    speculative_num_draft_tokens = k + 1); None when no verify step ran, as SGLang sends none."""
    spec = spec_decoding(tokens, k, detailed=False)
    steps, accepted = spec["num_spec_steps"], spec["num_accepted_draft_tokens"]
    if not steps:
        return None
    histogram = spec["acceptance_histogram"]
    while histogram and not histogram[-1]:  # SGLang's list grows to the largest count seen
        histogram = histogram[:-1]
    return {
        "spec_accept_rate": accepted / (steps * k),
        "spec_accept_length": tokens / steps,  # completion tokens / verify steps
        "spec_cap_length": 0.0,
        "spec_block_accept_length": 0.0,
        "spec_num_correct_drafts": accepted,
        "spec_num_proposed_drafts": steps * k,
        "spec_verify_ct": steps,
        "spec_correct_drafts_histogram": histogram,
        "spec_cap_lens_histogram": [],
    }
