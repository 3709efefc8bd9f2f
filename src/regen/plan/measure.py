"""What the calibration measured, read back from the run's own completion records (the same
lines `regen generate` writes), and a latency model per server fitted to it.

A request holds one of a server's client slots for `a + b * tokens` seconds: `a` is the
fixed part (queueing, prefill), `b` the time per output token at the configured concurrency.
Fitted by least squares per server; with too little spread in lengths to separate the two,
`a` is 0 and `b` the ratio of means.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from regen.records import record_key
from regen.storage import open_store

LATENCY_RESOLUTION_S = 0.001


@dataclass(frozen=True, slots=True)
class Observation:
    tokens: int  # output tokens of the whole item (all regenerated turns)
    latency: float  # seconds the item held a client slot
    server: str
    hit_max: bool  # finish_reason "length": the answer was cut at max tokens
    weight: float  # prompts of the file this one stands for
    line: int = 0  # its input line: the calibration dispatched in this order


@dataclass(frozen=True, slots=True)
class LatencyModel:
    fixed_s: float
    per_token_s: float

    def latency(self, tokens: float) -> float:
        # Records keep latency to the millisecond: a faster answer reads as 0.000 s.
        return max(self.fixed_s + self.per_token_s * tokens, LATENCY_RESOLUTION_S)


def read_observations(
    output_dir: Path, ids: dict[str, float], samples: int
) -> tuple[list[Observation], int]:
    """Observations for the sampled (id, sample) keys, and how many of them failed."""
    wanted = {record_key(pid, k): w for pid, w in ids.items() for k in range(samples)}
    store = open_store(output_dir)
    found: list[Observation] = []
    for record in store.iter_records("completions"):
        weight = wanted.get(record_key(record["id"], record["sample"]))
        if weight is None:
            continue
        found.append(
            Observation(
                tokens=record["usage"]["completion_tokens"],
                latency=record["meta"]["latency_s"],
                server=record["meta"]["server"],
                hit_max=record["finish_reason"] == "length",
                weight=weight,
                line=record["meta"]["line"],
            )
        )
    failed = sum(
        1
        for r in store.iter_records("errors")
        if r.get("sample") is not None and record_key(r["id"], r["sample"]) in wanted
    )
    return found, failed


def by_server(observations: list[Observation]) -> dict[str, list[Observation]]:
    groups: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        groups[obs.server].append(obs)
    return dict(groups)


def fit(observations: list[Observation]) -> LatencyModel:
    n = len(observations)
    mean_t = sum(o.tokens for o in observations) / n
    mean_l = sum(o.latency for o in observations) / n
    var_t = sum((o.tokens - mean_t) ** 2 for o in observations) / n
    if n >= 3 and var_t > 0:
        cov = sum((o.tokens - mean_t) * (o.latency - mean_l) for o in observations) / n
        slope = cov / var_t
        fixed = mean_l - slope * mean_t
        if slope > 0 and fixed >= 0:
            return LatencyModel(fixed, slope)
    return LatencyModel(0.0, mean_l / max(mean_t, 1.0))


def weighted_quantile(values: list[float], weights: list[float], q: float) -> float:
    pairs = sorted(zip(values, weights, strict=True))
    total = sum(weights)
    running = 0.0
    for value, weight in pairs:
        running += weight
        if running >= q * total:
            return value
    return pairs[-1][0]
