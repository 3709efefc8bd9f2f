"""`--format openai-batch`: the results in the shape of an OpenAI / vLLM batch output file.

Users who came with a batch request file (`{"custom_id", "method", "url", "body"}`, read by
regen.batch_input) expect one output line per request, joined on their `custom_id`:

    {"id", "custom_id", "prompt_id", "sample",
     "response": {"status_code": 200, "request_id", "body": chat.completion}, "error": null}
    {"id", "custom_id", "prompt_id", "sample", "response": null, "error": {"code", "message"}}

The batch format joins on `custom_id`, one per line: it is the prompt id (the batch line's
own custom_id) for sample 0, and `ID#k` for sample k > 0 (`--samples-per-prompt`, a
request's `n`), since two lines cannot share one. `prompt_id` (the id exactly as given) and
`sample` say the same apart, so no one has to split the string. The errors of the run are
written too, except those whose (prompt, sample) has a completion (a later `--retry-errors`
run answered it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import xxhash

from regen.export.format_base import Format
from regen.finished.mask import Encoded
from regen.finished.record import Completion, SampleKey, key_of
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
    several_files = "The lines are in {n} files, train-*-of-*.jsonl (--max-file-mb)."

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        raw = completion.raw
        key = custom_id(completion.id, completion.sample)
        self._done.add(key)
        message = {k: completion.final[k] for k in MESSAGE_KEYS if completion.final.get(k)}
        message.setdefault("content", completion.final.get("content"))
        usage = raw.get("usage") or {}
        body = {
            "id": f"chatcmpl-{_request_id(key)[6:]}",
            "object": "chat.completion",
            "model": (raw.get("meta") or {}).get("model"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": raw.get("finish_reason")}
            ],
            "usage": {
                **usage,
                "total_tokens": sum(
                    usage.get(k, 0) for k in ("prompt_tokens", "completion_tokens")
                ),
            },
        }
        response = {"status_code": 200, "request_id": _request_id(key), "body": body}
        return {
            "id": _request_id(key),
            "custom_id": key,
            "prompt_id": completion.id,
            "sample": completion.sample,
            "response": response,
            "error": None,
        }

    def extra_rows(self, runs: Iterable[str | Path]) -> Iterator[dict]:
        """The failed requests of the runs, as batch error lines."""
        for run in runs:
            for record in open_store(run).iter_records("errors"):
                prompt_id, sample = str(record.get("id")), int(record.get("sample") or 0)
                key = custom_id(prompt_id, sample)
                if key in self._done:
                    continue
                error = record.get("error") or {}
                failed = {"code": error.get("type"), "message": error.get("message")}
                yield {
                    "id": _request_id(key),
                    "custom_id": key,
                    "prompt_id": prompt_id,
                    "sample": sample,
                    "response": None,
                    "error": failed,
                }

    def key(self, row: dict[str, Any]) -> SampleKey:
        """custom_id: one per (prompt, sample), built the same way by every regen version, so
        the exact key also for lines written before `prompt_id` and `sample` were."""
        return str(row["custom_id"]), 0

    def upgrade(self, row: dict[str, Any]) -> dict[str, Any]:
        """A line written before `prompt_id` and `sample` were: read from its custom_id (a
        custom_id `a#2` then reads as prompt `a`, sample 2, even if `a#2` was a prompt's id:
        the old line cannot say which)."""
        if "sample" in row:
            return row
        prompt_id, sample = key_of({"id": row.get("custom_id")})
        head = {k: row[k] for k in ("id", "custom_id") if k in row}
        return {**head, "prompt_id": prompt_id, "sample": sample, **row}
