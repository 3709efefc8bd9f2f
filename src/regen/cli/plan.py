"""`regen plan`: how long and how much, before a run (a calibration sample) or during it."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from regen.cli.generate import server_urls_after_flag
from regen.cli.options import sampling_from, shared_run_options
from regen.display import PlainReporter
from regen.errors import ConfigError
from regen.fleet.server import Timeouts
from regen.plan import render
from regen.plan.calibrate import Pricing
from regen.plan.calibrate import plan as run_plan
from regen.plan.from_run import from_run
from regen.plan.sweep import default_levels, sweep
from regen.run.config import GenerateConfig


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--prompts", help="Prompt JSONL (.zst ok): a path or an fsspec URL.")
@shared_run_options
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path),
    help="Keep the calibration answers as the first records of this run.",
)
@click.option("--sample", type=int, help="Prompts to calibrate on [max(100, 2 x all slots)].")
@click.option("--sample-seed", type=int, default=0, show_default=True)
@click.option("--request-timeout", type=float, default=1800, show_default=True)
@click.option("--stream", is_flag=True, help="Stream responses (as generate --stream).")
@click.option("--gpu-hour-cost", type=float, help="USD per GPU-hour, to price the run.")
@click.option("--gpus-per-server", type=int, default=1, show_default=True)
@click.option("--sweep", is_flag=True, help="Try a few --concurrency values; recommend one.")
@click.option("--sweep-levels", help="Comma-separated concurrencies for --sweep.")
@click.option("--from-run", type=click.Path(path_type=Path), help="Re-estimate a run's rest.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def plan(ctx: click.Context, **opts) -> None:
    """Estimate wall time, output tokens and cost of a run from a calibration sample of its
    prompts, on its fleet, with its flags (or of the rest of a run with --from-run)."""
    pricing = Pricing(opts["gpu_hour_cost"], opts["gpus_per_server"])
    if opts["from_run"]:
        _emit(from_run(opts["from_run"], pricing), render.from_run_lines, opts["as_json"])
        return
    if not opts["prompts"]:
        raise ConfigError("regen plan needs --prompts FILE (or --from-run DIR)")
    config = GenerateConfig(
        prompts=opts["prompts"], output_dir=opts["output_dir"] or Path("."),
        servers=[*opts["servers"], *server_urls_after_flag(ctx.args)],
        local_model=opts["local_model"], model=opts["model"], sampling=sampling_from(opts),
        concurrency=opts["concurrency"], samples_per_prompt=opts["samples_per_prompt"],
        regenerate_turns=opts["regenerate_turns"], api_key_env=opts["api_key_env"],
        timeouts=Timeouts(request=opts["request_timeout"], stream=opts["stream"]), display="none",
    )  # fmt: skip
    report = None if opts["as_json"] else PlainReporter(15, sys.stderr)
    if opts["sweep"]:
        levels = _levels(opts["sweep_levels"]) or default_levels(config.per_server_concurrency)
        result = sweep(config, levels, sample_seed=opts["sample_seed"], report=report)
        _emit(result.to_json(), render.sweep_lines, opts["as_json"])
        return
    result = run_plan(
        config, sample_size=opts["sample"], sample_seed=opts["sample_seed"], pricing=pricing,
        keep=opts["output_dir"] is not None, report=report,
    )  # fmt: skip
    _emit(result.to_json(), lambda d: render.plan_lines(d, str(opts["prompts"])), opts["as_json"])


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
