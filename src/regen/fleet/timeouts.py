"""How long a request to a server may take, by phase (fleet/server.py uses them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Timeouts:
    """`request`: a whole completion (a 4096-token answer at 30 tok/s takes ~140 s, so the
    default is far above that); `connect`: opening a connection; `stall`: the longest silence
    inside a streamed response (only with `stream`: a non-streamed answer is silent until it
    is whole, so there a hung server is found by the health checks instead)."""

    request: float = 1800.0
    connect: float = 10.0
    stall: float = 300.0
    stream: bool = False
