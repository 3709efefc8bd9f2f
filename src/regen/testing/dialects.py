"""How each engine's OpenAI server words what it sends, for the fake server.

Facts only, each with the engine file it comes from: `SG:` is `sglang/srt/...` in the SGLang
0.5.23 wheel, `VL:` is `vllm/...` in the vLLM 0.33.0 wheel (or 0.32.0 where marked: the CPU
build the tests run for real, tests/test_dialect_conformance.py), `LC:` is `llama_cpp/...` in the
llama-cpp-python 0.3.36 wheel (the embedded server). Line numbers are of those releases (see
the audit behind issue 18). Messages are the engines' in substance, not always to the letter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Dialect:
    name: str
    version: str
    # The field of message/delta that carries separated reasoning.
    reasoning_field: str
    # Where token ids go when the request asks `return_token_ids` (None: never sent).
    token_ids: Literal["sglang", "vllm"] | None
    # Streamed token ids: "chunks" (each chunk carries its ids), "refuse" (400), or None.
    stream_token_ids: Literal["chunks", "refuse"] | None
    # prompt + max_tokens over the context: "reject" (400) or "clamp" (max_tokens lowered).
    overflow: Literal["reject", "clamp"]
    # The finish reasons of an answer the engine cut short, sent with HTTP 200.
    abort_reasons: tuple[str, ...]
    # Error bodies: "top" = {"object": "error", "message", "type", "code"} at the top level;
    # "wrapped" = {"error": {"message", "type", "param", "code"}}.
    error_shape: Literal["top", "wrapped"]
    # GET path -> what it answers (version and engine facts); the server adds the rest.
    info_paths: tuple[str, ...]
    seed_needs_flag: bool  # seeds are ignored unless the server runs deterministic
    # Where a speculating server puts a request's acceptance counts: "metrics" (vLLM's
    # metrics.speculative_decoding), "sglext" (SGLang's sglext.spec_tokens_details, only
    # when the request asks return_spec_tokens_details), or None (not per request).
    spec_counts: Literal["metrics", "sglext"] | None

    def error_body(self, status: int, message: str, kind: str = "BadRequestError") -> dict:
        error = {"message": message, "type": kind, "param": None, "code": status}
        if self.error_shape == "top":
            return {"object": "error", **error}
        return {"error": error}

    def overflow_message(self, prompt_tokens: int, max_tokens: int, context: int) -> str:
        """The 400 for a request whose prompt alone, or prompt + max_tokens, is too long."""
        if self.name == "sglang":
            if prompt_tokens >= context:  # SG:managers/tokenizer_manager.py:1337-1352
                return (
                    f"The input ({prompt_tokens} tokens) is longer than the model's context "
                    f"length ({context} tokens)."
                )
            # SG:managers/tokenizer_manager.py:1353-1377
            return (
                f"Requested token count exceeds the model's maximum context length of {context} "
                f"tokens. You requested a total of {prompt_tokens + max_tokens} tokens: "
                f"{prompt_tokens} tokens from the input messages and {max_tokens} tokens for the "
                "completion. Please reduce the number of tokens in the input messages or the "
                "completion to fit within the limit."
            )
        if self.name == "vllm":  # VL:renderers/params.py:527-535 (0.32.0, the real one in CI)
            return (
                f"This model's maximum context length is {context} tokens. However, your "
                f"prompt contains {prompt_tokens} input tokens, which exceeds this limit even "
                "without any output tokens. Please reduce the length of the input prompt. "
                f"(parameter=input_tokens, value={prompt_tokens})"
            )
        # LC:server/errors.py:48-83 (a prompt that fills the context, LC:llama.py:1344-1347)
        return (
            f"This model's maximum context length is {context} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} "
            "in the completion). Please reduce the length of the messages or completion."
        )

    def info(
        self, path: str, deterministic: bool, context: int, tool_parser: str | None = None
    ) -> dict[str, Any]:
        if self.name == "sglang":  # SG:entrypoints/http_server.py (/get_server_info)
            # server args, among them the determinism switch (SG:.../fields/exec_.py:1153-1155)
            # and the tool-call parser (None unless --tool-call-parser)
            return {
                "version": self.version,
                "enable_deterministic_inference": deterministic,
                "context_length": context,
                "tool_call_parser": tool_parser,
            }
        return {"version": self.version}  # VL:entrypoints/serve (GET /version)


SGLANG = Dialect(
    name="sglang",
    version="0.5.23",
    reasoning_field="reasoning_content",  # SG:entrypoints/openai/protocol.py:1293-1297,1354-1358
    token_ids="sglang",  # per choice prompt_token_ids/response_token_ids: protocol.py:1318-1319
    stream_token_ids="refuse",  # 400 for stream + return_token_ids: serving_chat.py:1309-1320
    overflow="reject",  # SG:managers/tokenizer_manager.py:1353-1377
    abort_reasons=("abort",),  # SG:entrypoints/openai/protocol.py:1307-1317
    error_shape="top",  # ErrorResponse at the top level: SG:entrypoints/openai/protocol.py:106-111
    info_paths=("/get_server_info", "/server_info"),
    seed_needs_flag=True,  # SG:sampling/sampling_batch_info.py:128,157-171
    # SG:entrypoints/openai/serving_chat.py (OpenAIServingChat._build_chat_response),
    # SG:entrypoints/openai/protocol.py (SpecTokensDetails; see regen/fleet/sglang_spec.py)
    spec_counts="sglext",
)

VLLM = Dialect(
    name="vllm",
    version="0.33.0",
    reasoning_field="reasoning",  # VL:entrypoints/openai/chat_completion/protocol.py:76-86
    token_ids="vllm",  # top-level prompt_token_ids, choices[i].token_ids: protocol.py:128,155
    stream_token_ids="chunks",  # first chunk prompt_token_ids, each chunk token_ids: :179,195
    overflow="clamp",  # VL:entrypoints/serve/utils/api_utils.py:234-272
    abort_reasons=("abort", "error"),  # VL:v1/engine/__init__.py:37,49-67
    error_shape="wrapped",  # VL:entrypoints/serve/engine/protocol.py:79-87
    info_paths=("/version",),
    seed_needs_flag=False,  # VL:sampling_params.py:325
    spec_counts="metrics",  # VL:entrypoints/generate/base/protocol.py:100-129 (0.32.0)
)

LLAMACPP = Dialect(
    name="llamacpp",
    version="0.3.36",
    reasoning_field="reasoning_content",  # none separated: <think> stays inline in content
    token_ids=None,
    stream_token_ids=None,
    overflow="clamp",  # max_tokens lowered to what fits: LC:llama.py:1353-1358
    abort_reasons=(),
    error_shape="wrapped",  # {"error": ErrorResponse}: LC:server/errors.py:155-160,208
    info_paths=(),  # no version endpoint: regen knows it from FLEET.json when it started it
    seed_needs_flag=False,  # LC:server/types.py:139 (seed per request)
    spec_counts=None,  # the embedded server does not speculate
)

DIALECTS = {d.name: d for d in (SGLANG, VLLM, LLAMACPP)}
