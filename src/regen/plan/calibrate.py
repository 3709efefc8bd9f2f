"""`regen plan`: send a calibration sample through `regen generate`'s own run (same fleet
code, sampling, thinking, max tokens, concurrency), then estimate the whole file from it.

The sample is a real run restricted to the sampled lines (`generate(..., only_lines=)`): with
`output_dir` its completions are the first records of that run, in its files and manifest, so
the `regen generate` that follows skips them; without, the run goes to a temporary dir.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from regen.errors import RegenError, RunStateError
from regen.format.layout import COMPLETIONS, ERRORS
from regen.plan.estimate import Estimate, estimate, measured_slots, overhead_factor
from regen.plan.figures import PlanReport, answer_lengths, server_figures
from regen.plan.measure import Observation, read_observations
from regen.plan.sample import CalibrationSample, draw_sample
from regen.run.config import GenerateConfig
from regen.run.generate import Reporter, generate
from regen.storage import open_store


@dataclass(frozen=True)
class Pricing:
    gpu_hour_usd: float | None = None
    gpus_per_server: int = 1

    def cost(self, seconds: float, servers: int) -> float | None:
        if self.gpu_hour_usd is None:
            return None
        return seconds / 3600 * self.gpu_hour_usd * self.gpus_per_server * servers


def default_sample_size(config: GenerateConfig) -> int:
    """Enough to keep every slot busy twice over (so the latencies are those of a full
    fleet), and at least 100 answers for the length distribution."""
    servers = max(1, len(config.fleet.server_urls()))
    return max(100, 2 * servers * config.fleet.per_server_concurrency)


def plan(
    config: GenerateConfig,
    *,
    sample_size: int | None = None,
    sample_seed: int = 0,
    pricing: Pricing | None = None,
    keep: bool = False,
    report: Reporter | None = None,
) -> PlanReport:
    """Calibrate on a sample of `config.input.prompts` and estimate the whole run.

    keep: the calibration records go to `config.output.dir` (the run's first records);
    otherwise to a temporary directory that is removed afterwards.
    """
    pricing = pricing or Pricing()
    sample = draw_sample(
        config.input.prompts, sample_size or default_sample_size(config), sample_seed
    )
    if sample.size == 0:
        raise RunStateError(
            f"{config.input.prompts} has no usable prompt to calibrate on",
            hint="run regen generate on it to see why each line is unusable",
        )
    with contextlib.ExitStack() as stack:
        output_dir = config.output.dir
        if not keep:
            output_dir = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="regen-plan-"))
            )
        started = time.monotonic()
        cal = calibrate(config, output_dir, sample, report)
        seconds = time.monotonic() - started
        completions, errors = _finished(output_dir) if keep else (0, 0)
    observations, concurrency = cal.observations, config.fleet.per_server_concurrency
    slots = measured_slots(observations, concurrency, cal.dispatch_seconds)
    overhead = overhead_factor(observations, slots, cal.dispatch_seconds)
    answers = sample.prompts * config.input.samples_per_prompt  # what costs GPU time
    whole = estimate(answers, observations, slots, sample_seed, overhead)
    # what is left is counted as the run counts it (`regen.run.counts`: an unusable line, a
    # repeated id say, is an item, and errors/ holds it once recorded), and timed by the
    # answers among it
    left_items = max(answers + sample.bad_lines - completions - errors, 0)
    left_answers = min(left_items, max(answers - completions, 0))
    left = estimate(left_answers, observations, slots, sample_seed, overhead)
    servers = max(1, len(config.fleet.server_urls()))
    return PlanReport(
        prompts=sample.prompts,
        bad_lines=sample.bad_lines,
        samples_per_prompt=config.input.samples_per_prompt,
        estimate=whole,
        cost_usd=pricing.cost(whole.wall_seconds, servers),
        cost_range_usd=_cost_range(pricing, whole, servers),
        servers=server_figures(observations, whole, slots, concurrency),
        answers=answer_lengths(observations),
        calibration={
            "prompts": sample.size,
            "completions": len(observations),
            "failed": cal.failed,
            "seconds": round(seconds, 1),
            "dispatch_seconds": None
            if cal.dispatch_seconds is None
            else round(cal.dispatch_seconds, 1),
            "overhead_factor": round(overhead, 3),
            "seed": sample_seed,
            "strata": len(sample.strata),
            "kept_in": str(config.output.dir) if keep else None,
        },
        remaining=({"items": left_items, "wall_seconds": left.wall_seconds} if keep else None),
    )


@dataclass
class Calibration:
    observations: list[Observation]
    failed: int
    dispatch_seconds: float | None  # first request to last answer; None if not all new


def calibrate(
    config: GenerateConfig, output_dir: Path, sample: CalibrationSample, report: Reporter | None
) -> Calibration:
    """Run the sampled lines through generate and read back what came of them."""
    run = replace(config, output=replace(config.output, dir=output_dir))
    result = generate(run, report=report, only_lines=frozenset(sample.lines))
    if result.exit_code != 0:
        raise RunStateError(
            f"the calibration run stopped: {result.message}",
            hint="fix what it names (see regen status on the output dir), then plan again",
        )
    weights = {sample.ids[line]: weight for line, weight in sample.lines.items()}
    observations, failed = read_observations(output_dir, weights, config.input.samples_per_prompt)
    if not observations:
        raise RegenError(
            f"none of the {sample.size} calibration prompts got an answer ({failed} failed)",
            hint="look at the errors/ of the run (plan again with --output-dir to keep them)",
        )
    progress = open_store(output_dir).read_json("progress.json")
    all_new = result.stats.completed == len(observations)
    dispatch = progress["updated_unix"] - progress["started_unix"] if all_new else None
    return Calibration(observations, failed, dispatch)


def _finished(output_dir: Path) -> tuple[int, int]:
    store = open_store(output_dir)
    return store.count(COMPLETIONS), store.count(ERRORS)


def _cost_range(pricing: Pricing, est: Estimate, servers: int) -> list[float] | None:
    low = pricing.cost(est.wall_seconds_p10, servers)
    high = pricing.cost(est.wall_seconds_p90, servers)
    return None if low is None or high is None else [low, high]
