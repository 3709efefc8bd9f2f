"""`regen plan`: how long and how much, before a run (a calibration sample) or during it."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click
import orjson

from regen.cli.options import INPUT, OUTPUT, Command, option
from regen.cli.paths import InputPath, OutputPath
from regen.cli.run_options import (
    config_from,
    fleet_options,
    request_options,
    sampling_options,
    work_shape_options,
)
from regen.display import PlainReporter
from regen.errors import ConfigError
from regen.plan import render
from regen.plan.calibrate import Pricing
from regen.plan.calibrate import plan as run_plan
from regen.plan.from_run import from_run
from regen.plan.sweep import default_levels, sweep

PLAN = "Plan"


@click.command(cls=Command)
@option(
    "--prompts",
    metavar="FILE",
    group=INPUT,
    to="input.prompts",
    help="The prompt file of the run to plan.",
)
@work_shape_options
@fleet_options
@request_options
@sampling_options
@option("--sample", type=int, group=PLAN, help="Prompts to calibrate on [max(100, 2 x slots)].")
@option(
    "--sample-seed",
    type=int,
    default=0,
    show_default=True,
    group=PLAN,
    help="Seed of the calibration sample.",
)
@option("--gpu-hour-cost", type=float, metavar="USD", group=PLAN, help="Price per GPU-hour.")
@option(
    "--gpus-per-server",
    type=int,
    default=1,
    show_default=True,
    group=PLAN,
    help="GPUs each server holds (for the cost).",
)
@option("--sweep", is_flag=True, group=PLAN, help="Try a few concurrencies; recommend one.")
@option("--sweep-levels", metavar="N,N,...", group=PLAN, help="Concurrencies for --sweep.")
@option(
    "--from-run",
    type=InputPath(buckets=True),
    metavar="DIR",
    group=PLAN,
    help="Re-estimate the rest of this run (as regen status's ETA).",
)
@option(
    "-o",
    "--output-dir",
    type=OutputPath("run"),
    metavar="RUN",
    group=OUTPUT,
    help="Keep the calibration answers as the first records of this run.",
)
@option("--json", "as_json", is_flag=True, group=OUTPUT, help="Machine-readable output.")
def plan(**opts) -> None:
    """Estimate wall time, output tokens and cost of a run from a calibration sample of its
    prompts, on its fleet, with its flags (or of the rest of a run with --from-run)."""
    pricing = Pricing(opts["gpu_hour_cost"], opts["gpus_per_server"])
    if opts["from_run"]:
        _emit(from_run(opts["from_run"], pricing), render.from_run_lines, opts["as_json"])
        return
    if not opts["prompts"]:
        raise ConfigError("regen plan needs --prompts FILE (or --from-run DIR)")
    fixed = {"output.dir": opts["output_dir"] or Path("."), "display.mode": "none"}
    config = config_from(opts, fixed)
    # plan models a fixed number of slots per server (default 64), as generate runs with
    # --fixed-concurrency; live concurrency would move the level it measures
    config = replace(config, fleet=replace(config.fleet, fixed_concurrency=True))
    report = None if opts["as_json"] else PlainReporter(15, sys.stderr)
    if opts["sweep"]:
        levels = _levels(opts["sweep_levels"]) or default_levels(
            config.fleet.per_server_concurrency
        )
        result = sweep(config, levels, sample_seed=opts["sample_seed"], report=report)
        _emit(result.to_json(), render.sweep_lines, opts["as_json"])
        return
    estimate = run_plan(
        config,
        sample_size=opts["sample"],
        sample_seed=opts["sample_seed"],
        pricing=pricing,
        keep=opts["output_dir"] is not None,
        report=report,
    )
    _emit(estimate.to_json(), lambda d: render.plan_lines(d, str(opts["prompts"])), opts["as_json"])


def _levels(text: str | None) -> list[int]:
    try:
        levels = [int(part) for part in (text or "").split(",") if part.strip()]
    except ValueError as exc:
        raise ConfigError(f"--sweep-levels {text!r}: give integers, e.g. 8,16,32,64") from exc
    if any(level < 1 for level in levels):
        raise ConfigError("--sweep-levels: every concurrency must be at least 1")
    return levels


def _emit(data: dict, lines, as_json: bool) -> None:
    if as_json:
        click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
        return
    for line in lines(data):
        click.echo(line)
