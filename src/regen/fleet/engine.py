"""What a server is: its engine, version, and whether a request's seed means anything there
(filled in by `engine_info.identify`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EngineInfo:
    name: str  # sglang | vllm | llamacpp | unknown
    version: str | None = None
    seed_honoured: bool | None = None  # None: not known
    sampling_defaults: str | None = None  # what an unset field means, where the server says
    parses_tools: bool | None = None  # runs a tool-call parser, where the server says (SGLang)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}


UNKNOWN = EngineInfo("unknown")
