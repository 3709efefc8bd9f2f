"""`--format openai-batch`: the results in the shape of an OpenAI / vLLM batch output file.

Users who came with a batch request file (`{"custom_id", "method", "url", "body"}`, read by
regen.batch_input) expect one output line per request, joined on their `custom_id`:

    {"id", "custom_id", "response": {"status_code": 200, "request_id", "body": chat.completion},
     "error": null}
    {"id", "custom_id", "response": null, "error": {"code", "message"}}     a failed request

`custom_id` is the prompt id (the batch line's own custom_id); sample k > 0 of a prompt
(`--samples-per-prompt`) is `ID#k`. The errors of the run are written too, except those
whose (prompt, sample) has a completion (a later `--retry-errors` run answered it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import xxhash

from regen.check.mask import Encoded
from regen.check.record import Completion
from regen.export.format_base import Format
from regen.storage import open_store

MESSAGE_KEYS = ("role", "content", "reasoning_content", "tool_calls")


def custom_id(prompt_id: Any, sample: Any) -> str:
    return str(prompt_id) if not sample else f"{prompt_id}#{sample}"


def _request_id(key: str) -> str:
    return f"regen-{xxhash.xxh64_hexdigest(key.encode())}"


class OpenAIBatch(Format):
    name = "openai-batch"
    per_domain = False
    is_training_set = False  # one file, no validation split

    def __init__(self, reasoning: str = "inline", supervise: str = "regenerated") -> None:
        super().__init__(reasoning, supervise)
        self._done: set[str] = set()

    how_to_train = (
        "not a training set: OUT/data/default/train-00000-of-00001.jsonl holds one line per "
        "request, as an OpenAI batch output file; join it to your requests on custom_id."
    )

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        raw = completion.raw
        key = custom_id(raw.get("id"), raw.get("sample"))
        self._done.add(key)
        message = {k: completion.final[k] for k in MESSAGE_KEYS if completion.final.get(k)}
        message.setdefault("content", completion.final.get("content"))
        usage = raw.get("usage") or {}
        body = {
            "id": f"chatcmpl-{_request_id(key)[6:]}",
            "object": "chat.completion",
            "model": (raw.get("meta") or {}).get("model"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": raw.get("finish_reason")}],
            "usage": {**usage, "total_tokens": sum(usage.get(k, 0) for k in
                                                   ("prompt_tokens", "completion_tokens"))},
        }  # fmt: skip
        return {"id": _request_id(key), "custom_id": key,
                "response": {"status_code": 200, "request_id": _request_id(key), "body": body},
                "error": None}  # fmt: skip

    def extra_rows(self, runs: Iterable[str | Path]) -> Iterator[dict]:
        """The failed requests of the runs, as batch error lines."""
        for run in runs:
            for record in open_store(run).iter_records("errors"):
                key = custom_id(record.get("id"), record.get("sample"))
                if key in self._done:
                    continue
                error = record.get("error") or {}
                failed = {"code": error.get("type"), "message": error.get("message")}
                yield {"id": _request_id(key), "custom_id": key, "response": None,
                       "error": failed}  # fmt: skip
