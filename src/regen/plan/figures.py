"""The plan's figures: per server, the answer lengths, and the whole report as JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from statistics import median
from typing import Any

from regen.plan.estimate import Estimate, Slots, mean_tokens, server_rates
from regen.plan.measure import Observation, by_server, fit, weighted_quantile

SLOWER_THAN = 0.8  # a server below 80% of the median server's rate is named as slower


@dataclass(frozen=True)
class ServerFigures:
    url: str
    completions: int  # calibration answers it gave
    completions_per_second: float  # its share of the estimated run, over the run's wall time
    output_tokens_per_second: float
    latency_mean_s: float
    latency_p90_s: float
    fixed_s: float  # the latency model: fixed_s + per_token_s * tokens
    per_token_s: float
    slots: int  # requests in flight it was estimated at (what the calibration kept busy)
    concurrency: int  # --concurrency-per-server
    slower: bool = False


@dataclass(frozen=True)
class PlanReport:
    prompts: int
    bad_lines: int
    samples_per_prompt: int
    estimate: Estimate
    cost_usd: float | None
    cost_range_usd: list[float] | None
    servers: list[ServerFigures]
    answers: dict[str, float]
    calibration: dict[str, Any]
    remaining: dict[str, float] | None = None

    @property
    def slower_servers(self) -> list[str]:
        return [s.url for s in self.servers if s.slower]

    def to_json(self) -> dict[str, Any]:
        est = self.estimate
        return {
            "prompts": self.prompts,
            "bad_lines": self.bad_lines,
            "samples_per_prompt": self.samples_per_prompt,
            "completions": est.items,
            "wall_seconds": round(est.wall_seconds, 1),
            "wall_seconds_p10": round(est.wall_seconds_p10, 1),
            "wall_seconds_p90": round(est.wall_seconds_p90, 1),
            "output_tokens": round(est.output_tokens),
            "completions_per_second": round(est.completions_per_second, 3),
            "output_tokens_per_second": round(est.tokens_per_second, 1),
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 2),
            "cost_usd_p10_p90": (
                None if self.cost_range_usd is None else [round(c, 2) for c in self.cost_range_usd]
            ),
            "servers": [asdict(s) for s in self.servers],
            "slower_servers": self.slower_servers,
            "answer_tokens": self.answers,
            "calibration": self.calibration,
            "remaining": self.remaining,
        }


def server_figures(
    observations: list[Observation], whole: Estimate, slots: Slots, concurrency: int
) -> list[ServerFigures]:
    """Each server's part of the estimated run: its completions and tokens in the same
    simulation as the fleet's, so the servers' rates add up to the fleet's. A server is
    SLOWER by its steady rate (every slot it held busy), which a short file's tail hides."""
    models = {url: fit(group) for url, group in by_server(observations).items()}
    steady = server_rates(models, slots, mean_tokens(observations))
    typical = median(steady.values())
    wall = whole.wall_seconds
    figures = []
    for url, group in sorted(by_server(observations).items()):
        latencies = [o.latency for o in group]
        figures.append(
            ServerFigures(
                url=url,
                completions=len(group),
                completions_per_second=round(whole.server_items.get(url, 0) / wall, 3)
                if wall
                else 0.0,
                output_tokens_per_second=round(whole.server_tokens.get(url, 0) / wall, 1)
                if wall
                else 0.0,
                latency_mean_s=round(sum(latencies) / len(latencies), 3),
                latency_p90_s=round(weighted_quantile(latencies, [1.0] * len(group), 0.9), 3),
                fixed_s=round(models[url].fixed_s, 4),
                per_token_s=round(models[url].per_token_s, 6),
                slots=slots[url],
                concurrency=concurrency,
                slower=steady[url] < SLOWER_THAN * typical,
            )
        )
    return figures


def answer_lengths(observations: list[Observation]) -> dict[str, float]:
    """The answer-length distribution, weighted so that it describes the whole file."""
    lengths = [float(o.tokens) for o in observations]
    weights = [o.weight for o in observations]
    total = sum(weights)
    return {
        "mean": round(mean_tokens(observations), 1),
        "p10": weighted_quantile(lengths, weights, 0.1),
        "p50": weighted_quantile(lengths, weights, 0.5),
        "p90": weighted_quantile(lengths, weights, 0.9),
        "p99": weighted_quantile(lengths, weights, 0.99),
        "max": max(lengths),
        "hit_max_tokens_share": round(sum(o.weight for o in observations if o.hit_max) / total, 4),
    }
