"""`regen plan`: how long and how much, before a run (a calibration sample) or during it."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from regen.cli.generate import SERVER_DEFAULT, chosen_servers
from regen.cli.options import FLEET, INPUT, OUTPUT, SAMPLING, Command, option
from regen.display import PlainReporter
from regen.errors import ConfigError
from regen.fleet.server import Timeouts
from regen.plan import render
from regen.plan.calibrate import Pricing
from regen.plan.calibrate import plan as run_plan
from regen.plan.from_run import from_run
from regen.plan.sweep import default_levels, sweep
from regen.run.config import GenerateConfig, Sampling

PLAN = "Plan"


@click.command(cls=Command)
@option("--prompts", metavar="FILE", group=INPUT, help="The prompt file of the run to plan.")
@option("--samples-per-prompt", type=int, default=1, show_default=True, group=INPUT)
@option("--regenerate-turns", type=click.Choice(["last", "all"]), default="last", group=INPUT)
@option("--fleet", type=click.Path(path_type=Path), metavar="FLEET.json", group=FLEET)
@option(
    "--servers",
    multiple=True,
    multi_value=True,
    metavar="URL ...",
    group=FLEET,
    help="As generate [default: $OPENAI_BASE_URL, else the embedded model].",
)
@option("--local-model", type=click.Path(path_type=Path), metavar="GGUF", group=FLEET)
@option("--model", group=FLEET, help="Model name to request [default: what the servers list].")
@option("--api-key-env", metavar="VAR", group=FLEET)
@option(
    "--concurrency-per-server",
    "concurrency",
    type=int,
    metavar="N",
    group=FLEET,
    aliases=["--concurrency"],
    help="Requests in flight per server [64; embedded: 2].",
)
@option("--request-timeout", type=float, default=1800, show_default=True, group=FLEET)
@option("--stream", is_flag=True, group=FLEET, help="Stream responses (as generate --stream).")
@option("--max-output-tokens", type=int, default=4096, show_default=True, group=SAMPLING)
@option("--temperature", type=float, group=SAMPLING, help=SERVER_DEFAULT)
@option("--top-p", type=float, group=SAMPLING, help=SERVER_DEFAULT)
@option("--top-k", type=int, group=SAMPLING, help=SERVER_DEFAULT)
@option("--seed", type=int, group=SAMPLING, help="Base seed; sample k uses seed+k.")
@option("--thinking", type=click.Choice(["on", "off", "auto"]), default="auto", group=SAMPLING)
@option("--sample", type=int, group=PLAN, help="Prompts to calibrate on [max(100, 2 x slots)].")
@option("--sample-seed", type=int, default=0, show_default=True, group=PLAN)
@option("--gpu-hour-cost", type=float, metavar="USD", group=PLAN, help="Price per GPU-hour.")
@option("--gpus-per-server", type=int, default=1, show_default=True, group=PLAN)
@option("--sweep", is_flag=True, group=PLAN, help="Try a few concurrencies; recommend one.")
@option("--sweep-levels", metavar="N,N,...", group=PLAN, help="Concurrencies for --sweep.")
@option(
    "--from-run",
    type=click.Path(path_type=Path),
    metavar="DIR",
    group=PLAN,
    help="Re-estimate the rest of this run (as regen status's ETA).",
)
@option(
    "--output-dir",
    type=click.Path(path_type=Path),
    group=OUTPUT,
    help="Keep the calibration answers as the first records of this run.",
)
@option("--json", "as_json", is_flag=True, group=OUTPUT, help="Machine-readable output.")
def plan(**opts) -> None:  # fmt: skip
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
        servers=chosen_servers(opts), fleet=opts["fleet"], local_model=opts["local_model"],
        model=opts["model"], sampling=Sampling(
            max_tokens=opts["max_output_tokens"], temperature=opts["temperature"],
            top_p=opts["top_p"], top_k=opts["top_k"], seed=opts["seed"], thinking=opts["thinking"],
        ),
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
    estimate = run_plan(
        config, sample_size=opts["sample"], sample_seed=opts["sample_seed"], pricing=pricing,
        keep=opts["output_dir"] is not None, report=report,
    )  # fmt: skip
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
