"""The fake engines of the live-concurrency benchmarks (bench_throughput.py, bench_faults.py,
bench_family.py): a fake server with an engine's curve (regen.testing.fake_engine), the
fleets made of them, and the prompts they are sent."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from fleet_processes import MODEL
from regen.testing import fake_engine


@dataclass(frozen=True)
class Engine:
    dialect: str
    curve: dict[str, Any]
    tokens: int = 400
    jitter: float = 0.5
    faults: tuple[str, ...] = ()  # cycled per request (fake_behaviour.Behaviour.faults)

    @property
    def metrics(self) -> bool:
        return self.curve.get("metrics", True)

    def args(self, port: int) -> list[str]:
        dialect = ["--dialect", self.dialect] if self.dialect else []
        return [
            sys.executable,
            "-m",
            "regen.testing.fake_server",
            "--port",
            str(port),
            "--engine",
            json.dumps(self.curve),
            *dialect,
            "--model",
            MODEL,
            "--tokens",
            str(self.tokens),
            "--tokens-jitter",
            str(self.jitter),
            *(["--faults", json.dumps(list(self.faults))] if self.faults else []),
        ]


# A GPU-like curve: the knee where the KV cache (60K tokens) holds ~110 requests of this mix.
BIG = Engine("vllm", {"kv_tokens": 60_000, "max_running": 256, "time_scale": 0.2})
# A smaller, slower server (another GPU kind or tensor-parallel size), SGLang's dialect.
SMALL = Engine(
    "sglang",
    {
        "kv_tokens": 24_000,
        "max_running": 48,
        "step_s": 0.03,
        "per_seq_s": 0.0003,
        "time_scale": 0.2,
    },
)
UNMET = Engine("", asdict(fake_engine.UNMET))  # the plain fake's wording, no /metrics
FLEETS = {"equal": [BIG, BIG], "mixed": [BIG, SMALL], "unmet": [UNMET] * 4}


def write_prompts(path: Path, count: int, words: int = 60) -> None:
    with open(path, "wb") as fh:
        for i in range(count):
            text = " ".join(f"w{i}x{j}" for j in range(words))
            line = {"id": f"p{i:06d}", "messages": [{"role": "user", "content": text}]}
            fh.write(orjson.dumps(line) + b"\n")
