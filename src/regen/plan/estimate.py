"""From a calibration's observations to the whole file: wall time with a P10-P90 range,
output tokens, completions per second.

The dispatch of `regen generate` is simulated, not guessed: every client slot of every
server takes the next item as soon as it frees (which is what least-loaded dispatch does on
a full fleet), each item's length drawn from the sample's answer lengths and its time from
the server's latency model. That gets the start, the steady state and the tail of long
answers right for small files; for large ones only the last `SIMULATED` items are simulated
and the rest runs at the steady-state rate. The range comes from a bootstrap: the sample is
resampled, the models refitted and the simulation rerun.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

from regen.plan.measure import LatencyModel, Observation, by_server, fit

SIMULATED = 2000
BOOTSTRAP_ROUNDS = 100
POINT_RUNS = 10


@dataclass(frozen=True)
class Estimate:
    items: int
    wall_seconds: float
    wall_seconds_p10: float
    wall_seconds_p90: float
    output_tokens: float
    completions_per_second: float
    tokens_per_second: float


def fleet_models(observations: list[Observation]) -> dict[str, LatencyModel]:
    return {server: fit(group) for server, group in by_server(observations).items()}


def mean_tokens(observations: list[Observation]) -> float:
    total = sum(o.weight for o in observations)
    return sum(o.tokens * o.weight for o in observations) / total


def steady_rate(models: dict[str, LatencyModel], concurrency: int, tokens: float) -> float:
    """Completions per second of a fleet whose every slot is always busy."""
    return sum(concurrency / model.latency(tokens) for model in models.values())


def schedule(tokens: list[int], models: dict[str, LatencyModel], concurrency: int) -> float:
    """When the last of these items (in dispatch order) finishes, each taking the first slot
    that frees up, as least-loaded dispatch does on a full fleet."""
    # Slots interleaved across servers: at the start the dispatcher fills them in turn.
    speed = [model for _ in range(concurrency) for model in models.values()]
    heap = [(0.0, slot) for slot in range(len(speed))]
    end = 0.0
    for count in tokens:
        free_at, slot = heapq.heappop(heap)
        done = free_at + speed[slot].latency(count)
        end = max(end, done)
        heapq.heappush(heap, (done, slot))
    return end


def simulate_wall(
    items: int,
    observations: list[Observation],
    models: dict[str, LatencyModel],
    concurrency: int,
    rng: random.Random,
) -> float:
    if items <= 0:
        return 0.0
    lengths = [o.tokens for o in observations]
    weights = [o.weight for o in observations]
    simulated = min(items, SIMULATED)
    end = schedule(rng.choices(lengths, weights, k=simulated), models, concurrency)
    steady = steady_rate(models, concurrency, mean_tokens(observations))
    return end + (items - simulated) / steady


def estimate(
    items: int,
    observations: list[Observation],
    concurrency: int,
    seed: int = 0,
    overhead: float = 1.0,
) -> Estimate:
    """`overhead`: measured / simulated wall time of the calibration itself (see
    `overhead_factor`); it scales every simulated wall time."""
    if not observations:
        raise ValueError("no observations to estimate from")
    rng = random.Random(seed)
    models = fleet_models(observations)
    # The point estimate averages several simulations: one alone varies with the few long
    # answers that happen to come last.
    walls = [
        simulate_wall(items, observations, models, concurrency, rng) for _ in range(POINT_RUNS)
    ]
    wall = overhead * sum(walls) / len(walls)
    rounds = []
    for _ in range(BOOTSTRAP_ROUNDS):
        resampled = rng.choices(observations, k=len(observations))
        refitted = {**models, **fleet_models(resampled)}  # a server missing from it keeps its fit
        rounds.append(overhead * simulate_wall(items, resampled, refitted, concurrency, rng))
    rounds.sort()
    tokens = items * mean_tokens(observations)
    return Estimate(
        items=items,
        wall_seconds=wall,
        wall_seconds_p10=rounds[len(rounds) // 10],
        wall_seconds_p90=rounds[(len(rounds) * 9) // 10],
        output_tokens=tokens,
        completions_per_second=items / wall if wall else 0.0,
        tokens_per_second=tokens / wall if wall else 0.0,
    )


def overhead_factor(
    observations: list[Observation], concurrency: int, measured_seconds: float | None
) -> float:
    """How much longer the calibration took than the model says its own items should have
    (client work between requests, event-loop delays, a model that misses something): the
    same items on the same servers in the same order, scheduled on the fitted models. 1 when
    not measurable."""
    if not measured_seconds or len(observations) < 2:
        return 1.0
    models = fleet_models(observations)
    # Each server's own answers, in dispatch order, on its own slots: which answers went to
    # the slow server decides a small calibration's tail, so that is replayed as it was.
    simulated = max(
        schedule([o.tokens for o in sorted(group, key=lambda o: o.line)], {url: models[url]},
                 concurrency)
        for url, group in by_server(observations).items()
    )  # fmt: skip
    return measured_seconds / simulated if simulated > 0 else 1.0
