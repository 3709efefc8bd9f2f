"""Prompt log-probability requests and answers, vLLM's and SGLang's, as match vectors.

vLLM (`vllm/entrypoints/openai/protocol.py` CompletionRequest.prompt_logprobs; answer
`choices[0].prompt_logprobs`: None for the first token, then per position a dict from token
id (a string in JSON) to {logprob, rank, decoded_token}, always holding the prompt's own
token with its vocabulary rank). SGLang (`io_struct.py` GenerateReqInput: return_logprob,
logprob_start_len, top_logprobs_num; answer `meta_info.input_token_logprobs` and
`input_top_logprobs`, one entry per position from logprob_start_len, each a
[logprob, token_id, text] triple).
"""

from __future__ import annotations

from typing import Any

from regen.errors import PermanentError
from regen.score.tokens import TokenRow
from regen.score.vocab import check_decoded

VLLM, SGLANG = "vllm", "sglang"


def request(api: str, model: str, ids: list[int], start: int) -> tuple[str, dict[str, Any]]:
    if api == VLLM:
        return "/v1/completions", {
            "model": model,
            "prompt": ids,
            "max_tokens": 1,
            "temperature": 0,
            "prompt_logprobs": 1,
        }
    return "/generate", {
        "input_ids": ids,
        "sampling_params": {"max_new_tokens": 1, "temperature": 0},
        "return_logprob": True,
        "logprob_start_len": start,
        "top_logprobs_num": 1,
        "return_text_in_logprobs": True,
    }


def parse_matches(api: str, data: Any, row: TokenRow, tok: Any, server: str) -> str:
    """The match vector over row.ids[row.start:]; with `tok`, the answer's decoded tokens are
    compared with the target's (a draft with another vocabulary is refused)."""
    try:
        hits, decoded = (_vllm if api == VLLM else _sglang)(data, row)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise PermanentError(
            f"{server} answered {api} prompt log-probs in an unexpected shape ({exc!r})",
            server=server,
            hint=f"is it a {api} server? pass --draft-api vllm or sglang to match the fleet",
        ) from exc
    if tok is not None:
        check_decoded(decoded, tok, f"--draft-servers {server}")
    return "".join("1" if hit else "0" for hit in hits)


def _vllm(data: Any, row: TokenRow) -> tuple[list[bool], list[tuple[int, str]]]:
    positions = data["choices"][0]["prompt_logprobs"]
    if len(positions) != len(row.ids):
        raise ValueError(f"{len(positions)} prompt_logprobs for {len(row.ids)} tokens")
    hits, decoded = [], []
    for i in range(row.start, len(row.ids)):
        own = positions[i][str(row.ids[i])]
        hits.append(own["rank"] == 1)
        decoded.append((row.ids[i], own.get("decoded_token")))
    return hits, decoded


def _sglang(data: Any, row: TokenRow) -> tuple[list[bool], list[tuple[int, str]]]:
    meta = data["meta_info"]
    own, top = meta["input_token_logprobs"], meta["input_top_logprobs"]
    skip = len(own) - (len(row.ids) - row.start)  # entries before the answer, if any
    if skip < 0 or len(top) != len(own):
        raise ValueError(f"{len(own)} input logprobs for {len(row.ids) - row.start} answer tokens")
    hits, decoded = [], []
    for j, i in enumerate(range(row.start, len(row.ids))):
        entry, best = own[skip + j], top[skip + j]
        if entry[1] != row.ids[i]:
            raise ValueError(f"position {i}: token {entry[1]}, expected {row.ids[i]}")
        hits.append(bool(best) and best[0][1] == row.ids[i])
        decoded.append((row.ids[i], entry[2] if len(entry) > 2 else None))
    return hits, decoded
