"""Prompt length in tokens, so a blend of giant or empty prompts shows up before generation.

Counts the tokens of message text and tool schemas, without the chat template (a few tokens
per turn short of what the server sees). A `tokenizer.json` file loads with `tokenizers`;
anything else is loaded the way `regen check` loads it (a directory, a .gguf file, a Hub
name, or `embedded`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import orjson

from regen.errors import ConfigError

Counter = Callable[[list[str]], list[int]]


def load_counter(name: str) -> Counter:
    path = os.path.expanduser(name)
    try:
        if path.endswith(".json") and os.path.isfile(path):
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(path)
            return lambda texts: [
                len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)
            ]
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot load tokenizer {name!r}: {exc}",
            hint="give a tokenizer.json file, a local model directory or a Hub name",
        ) from exc
    from regen.tokenizer import load_tokenizer

    auto = load_tokenizer(name, require_template=False)
    return lambda texts: [len(ids) for ids in auto(texts, add_special_tokens=False)["input_ids"]]


def prompt_text(line: bytes) -> str:
    record = orjson.loads(line)
    parts = [m["content"] if isinstance(m["content"], str) else "" for m in record["messages"]]
    if record.get("tools"):
        parts.append(orjson.dumps(record["tools"]).decode())
    return "\n".join(parts)


def token_lengths(tokenizer: str, lines: list[bytes]) -> dict[str, int | float]:
    count = load_counter(tokenizer)
    lengths = sorted(count([prompt_text(line) for line in lines])) if lines else []
    if not lengths:
        return {"count": 0}

    def pct(p: float) -> int:
        return lengths[min(len(lengths) - 1, int(p * len(lengths)))]

    return {
        "count": len(lengths),
        "mean": round(sum(lengths) / len(lengths), 1),
        "min": lengths[0],
        "p50": pct(0.5),
        "p90": pct(0.9),
        "p99": pct(0.99),
        "max": lengths[-1],
    }
