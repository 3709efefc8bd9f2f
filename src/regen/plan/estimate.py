"""From a calibration's observations to the whole file: wall time with a P10-P90 range,
output tokens, completions per second.

The dispatch of `regen generate` is simulated, not guessed: every client slot of every
server takes the next item as soon as it frees (which is what least-loaded dispatch does on
a full fleet), each item's length drawn from the sample's answer lengths and its time from
the server's latency model. That gets the start, the steady state and the tail of long
answers right for small files; for large ones only the last `SIMULATED` items are simulated
and the rest runs at the steady-state rate. The range comes from a bootstrap: the sample is
resampled, the models refitted and the simulation rerun.

A latency is only good for the load it was measured at: a server that queues (llama.cpp
answers one request at a time; a GPU engine past its batch) answers later the more it
holds. So each server is simulated with the slots the calibration really kept busy on it
(`measured_slots`, by Little's law), never more, and every figure, the fleet's and each
server's, comes from that one simulation: the server lines add up to the fleet line.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter
from dataclasses import dataclass, field

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
    server_items: dict[str, float] = field(default_factory=dict)  # of `items`, per server
    server_tokens: dict[str, float] = field(default_factory=dict)


Slots = dict[str, int]  # client slots per server URL that the estimate keeps busy


def slots_of(models: dict[str, LatencyModel], slots: int | Slots) -> Slots:
    return {url: slots if isinstance(slots, int) else slots[url] for url in models}


def measured_slots(
    observations: list[Observation], concurrency: int, measured_seconds: float | None
) -> Slots:
    """The requests each server really held at once in the calibration: its answers' total
    latency over the calibration's time (Little's law), rounded up, at most `concurrency`.
    A sample smaller than the slots (plan --sample 8 on 64 slots) never fills them, and its
    latencies say nothing of a full server; a full calibration gives `concurrency` back."""
    slots = {}
    for url, group in by_server(observations).items():
        held = concurrency
        if measured_seconds and len(group) < concurrency:
            busy = sum(o.latency for o in group) / measured_seconds
            held = max(1, min(concurrency, math.ceil(busy - 0.05)))  # 3.02 in flight is 3
        slots[url] = held
    return slots


def fleet_models(observations: list[Observation]) -> dict[str, LatencyModel]:
    return {server: fit(group) for server, group in by_server(observations).items()}


def mean_tokens(observations: list[Observation]) -> float:
    total = sum(o.weight for o in observations)
    return sum(o.tokens * o.weight for o in observations) / total


def server_rates(models: dict[str, LatencyModel], slots: int | Slots, tokens: float) -> dict:
    """Completions per second of each server whose every slot is always busy."""
    held = slots_of(models, slots)
    return {url: held[url] / model.latency(tokens) for url, model in models.items()}


@dataclass
class Tally:
    """What each server did in a simulation: items and output tokens."""

    items: Counter = field(default_factory=Counter)
    tokens: Counter = field(default_factory=Counter)


def schedule(
    tokens: list[int],
    models: dict[str, LatencyModel],
    slots: int | Slots,
    tally: Tally | None = None,
) -> float:
    """When the last of these items (in dispatch order) finishes, each taking the first slot
    that frees up, as least-loaded dispatch does on a full fleet."""
    held = slots_of(models, slots)
    # Slots interleaved across servers: at the start the dispatcher fills them in turn.
    owner = [url for n in range(max(held.values())) for url in models if n < held[url]]
    heap = [(0.0, slot) for slot in range(len(owner))]
    end = 0.0
    for count in tokens:
        free_at, slot = heapq.heappop(heap)
        done = free_at + models[owner[slot]].latency(count)
        end = max(end, done)
        heapq.heappush(heap, (done, slot))
        if tally is not None:
            tally.items[owner[slot]] += 1
            tally.tokens[owner[slot]] += count
    return end


def simulate_wall(
    items: int,
    observations: list[Observation],
    models: dict[str, LatencyModel],
    slots: int | Slots,
    rng: random.Random,
    tally: Tally | None = None,
) -> float:
    if items <= 0:
        return 0.0
    lengths = [o.tokens for o in observations]
    weights = [o.weight for o in observations]
    simulated = min(items, SIMULATED)
    end = schedule(rng.choices(lengths, weights, k=simulated), models, slots, tally)
    mean = mean_tokens(observations)
    rates = server_rates(models, slots, mean)
    steady = sum(rates.values())
    if tally is not None:  # the rest, shared as the servers' steady rates share it
        for url, rate in rates.items():
            tally.items[url] += (items - simulated) * rate / steady
            tally.tokens[url] += (items - simulated) * rate / steady * mean
    return end + (items - simulated) / steady


def estimate(
    items: int,
    observations: list[Observation],
    slots: int | Slots,
    seed: int = 0,
    overhead: float = 1.0,
) -> Estimate:
    """`slots`: per server (`measured_slots`), or one number for all. `overhead`: measured /
    simulated wall time of the calibration itself (see `overhead_factor`); it scales every
    simulated wall time."""
    if not observations:
        raise ValueError("no observations to estimate from")
    rng = random.Random(seed)
    models = fleet_models(observations)
    # The point estimate averages several simulations: one alone varies with the few long
    # answers that happen to come last.
    tally = Tally()
    walls = [
        simulate_wall(items, observations, models=models, slots=slots, rng=rng, tally=tally)
        for _ in range(POINT_RUNS)
    ]
    wall = overhead * sum(walls) / len(walls)
    rounds = []
    for _ in range(BOOTSTRAP_ROUNDS):
        resampled = rng.choices(observations, k=len(observations))
        refitted = {**models, **fleet_models(resampled)}  # a server missing from it keeps its fit
        rounds.append(overhead * simulate_wall(items, resampled, refitted, slots, rng))
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
        server_items={url: n / POINT_RUNS for url, n in tally.items.items()},
        server_tokens={url: n / POINT_RUNS for url, n in tally.tokens.items()},
    )


def overhead_factor(
    observations: list[Observation], slots: int | Slots, measured_seconds: float | None
) -> float:
    """How much longer the calibration took than the model says its own items should have
    (client work between requests, event-loop delays, a model that misses something): the
    same items on the same servers in the same order, scheduled on the fitted models. 1 when
    not measurable."""
    if not measured_seconds or len(observations) < 2:
        return 1.0
    models = fleet_models(observations)
    held = slots_of(models, slots)
    # Each server's own answers, in dispatch order, on its own slots: which answers went to
    # the slow server decides a small calibration's tail, so that is replayed as it was.
    simulated = max(
        schedule(
            [o.tokens for o in sorted(group, key=lambda o: o.line)], {url: models[url]}, held[url]
        )
        for url, group in by_server(observations).items()
    )
    return measured_seconds / simulated if simulated > 0 else 1.0
