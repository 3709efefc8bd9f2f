"""`regen generate`: prompts -> completions across a server fleet, exactly once, resumable."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from regen.cli.options import (
    DISPLAY,
    INPUT,
    OUTPUT,
    RELIABILITY,
    SAMPLING,
    SCALE,
    Command,
    option,
)
from regen.cli.run_options import (
    chosen_servers,
    fleet_options,
    request_options,
    sampling_from,
    sampling_options,
    work_shape_options,
)
from regen.display import make_reporter
from regen.fleet.dispatch import HealthPolicy, RetryPolicy
from regen.fleet.server import Timeouts
from regen.metrics import serve_metrics
from regen.run.config import GenerateConfig
from regen.run.generate import generate as run_generate
from regen.run.quality import Thresholds
from regen.scale.partition import parse_part, part_from_env
from regen.scale.ray_executor import run_on_ray
from regen.storage.uploader import UploadPolicy


@click.command(cls=Command)
@option(
    "--prompts",
    required=True,
    metavar="FILE",
    group=INPUT,
    help="Prompt JSONL (.zst ok) or an OpenAI/vLLM batch file: a path or an fsspec URL.",
)
@work_shape_options
@option(
    "--allow-changed-input",
    is_flag=True,
    group=INPUT,
    help="Resume although the prompt file changed.",
)
@fleet_options
@sampling_options
@option(
    "--allow-changed-sampling",
    is_flag=True,
    group=SAMPLING,
    help="Resume although sampling flags changed.",
)
@request_options
@option(
    "--stall-timeout",
    type=float,
    default=300,
    show_default=True,
    group=RELIABILITY,
    help="With --stream: seconds of silence before a response counts as stalled.",
)
@option(
    "--max-retries",
    type=int,
    default=5,
    show_default=True,
    group=RELIABILITY,
    help="Retries of a request after 5xx, 408, 429 or a timeout.",
)
@option(
    "--give-up-after",
    type=float,
    default=1800,
    show_default=True,
    group=RELIABILITY,
    help="Seconds with every server down before stopping (0: never).",
)
@option(
    "--health-interval",
    type=float,
    default=15,
    show_default=True,
    group=RELIABILITY,
    help="Seconds between liveness checks of a busy server.",
)
@option(
    "--drain-timeout",
    type=float,
    default=60,
    show_default=True,
    group=RELIABILITY,
    help="On SIGINT/SIGTERM: seconds to let requests in flight finish.",
)
@option("--retry-errors", is_flag=True, group=RELIABILITY, help="Retry what is in errors/.")
@option(
    "--abort-on-degenerate",
    is_flag=True,
    group=RELIABILITY,
    help="Stop when a quality alarm fires (exit 4).",
)
@option(
    "-o",
    "--output-dir",
    required=True,  # a str: a Path would fold s3://bucket into s3:/bucket
    metavar="RUN",
    group=OUTPUT,
    help="The run directory, or a bucket URL (s3://bucket/prefix, gs://, az://): "
    "every file of the run goes there.",
)
@option(
    "--staging-dir", type=click.Path(path_type=Path), metavar="DIR", group=OUTPUT,
    help="With a bucket RUN: local staging for shards not yet uploaded "
    "[~/.cache/regen/staging/<hash of the URL>].",
)  # fmt: skip
@option(
    "--upload-interval", type=float, default=300, show_default=True, group=OUTPUT,
    help="With a bucket RUN: seconds after which an open shard is sealed and uploaded.",
)  # fmt: skip
@option(
    "--staging-limit-mb", type=int, default=4096, show_default=True, group=OUTPUT,
    help="With a bucket RUN: pause requests while this much waits to be uploaded.",
)  # fmt: skip
@option(
    "--shard", metavar="I/N", group=SCALE,
    help="Do part I of N (a stable split by prompt id; N processes share one RUN) "
    "[from SLURM_ARRAY_TASK_ID/_COUNT, or JOB_COMPLETION_INDEX + REGEN_SHARD_COUNT].",
)  # fmt: skip
@option(
    "--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
    group=SCALE, help="ray: run --shards N parts as Ray tasks (a dead task is retried).",
)  # fmt: skip
@option("--shards", type=int, metavar="N", group=SCALE, help="With --executor ray: parts.")
@option(
    "--ray-address", metavar="ADDR", group=SCALE,
    help="With --executor ray: the cluster [default: a new local one].",
)  # fmt: skip
@option("--compress", is_flag=True, group=OUTPUT, help="Seal completion shards as .jsonl.zst.")
@option(
    "--return-token-ids",
    is_flag=True,
    group=OUTPUT,
    help="Store prompt/completion token ids (vLLM's return_token_ids).",
)
@option(
    "--display",
    type=click.Choice(["auto", "live", "plain", "none"]),
    default="auto",
    show_default=True,
    group=DISPLAY,
    help="Live panel on a terminal, plain lines in a log (auto picks).",
)
@option(
    "--log-interval",
    type=float,
    default=30,
    show_default=True,
    group=DISPLAY,
    help="Seconds between plain summaries.",
)
@option("--metrics-port", type=int, group=DISPLAY, help="Serve Prometheus metrics on this port.")
@option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    group=DISPLAY,
    help="Address the metrics endpoint listens on.",
)
def generate(**opts) -> None:
    """Generate completions for every prompt, resuming where a previous run stopped.

    --servers takes one or more URLs: `--servers http://h:30000 http://h:30001`.
    """
    logging.basicConfig(level=logging.ERROR, format="%(message)s")
    servers = chosen_servers(opts)
    config = GenerateConfig(
        prompts=opts["prompts"], output_dir=opts["output_dir"], servers=servers,
        fleet=opts["fleet"],
        local_model=opts["local_model"], model=opts["model"],
        sampling=sampling_from(opts),
        concurrency=opts["concurrency"], samples_per_prompt=opts["samples_per_prompt"],
        regenerate_turns=opts["regenerate_turns"], return_token_ids=opts["return_token_ids"],
        api_key_env=opts["api_key_env"], timeouts=Timeouts(
            request=opts["request_timeout"], stall=opts["stall_timeout"], stream=opts["stream"]
        ),
        retry=RetryPolicy(max_retries=opts["max_retries"]),
        health=HealthPolicy(
            liveness_interval=opts["health_interval"], give_up_after=opts["give_up_after"]
        ),
        quality=Thresholds(), abort_on_degenerate=opts["abort_on_degenerate"],
        retry_errors=opts["retry_errors"], allow_changed_input=opts["allow_changed_input"],
        allow_changed_sampling=opts["allow_changed_sampling"], compress=opts["compress"],
        drain_timeout=opts["drain_timeout"], display=opts["display"],
        log_interval=opts["log_interval"], staging_dir=opts["staging_dir"],
        part=parse_part(opts["shard"]) if opts["shard"] else part_from_env(),
        upload_interval=opts["upload_interval"],
        upload=UploadPolicy(staging_limit_bytes=opts["staging_limit_mb"] << 20),
        metrics_port=opts["metrics_port"], metrics_host=opts["metrics_host"],
    )  # fmt: skip
    if opts["executor"] == "ray":
        sys.exit(on_ray(config, opts["shards"], opts["ray_address"]))
    reporter = make_reporter(config.display, config.log_interval)
    with serve_metrics(config.metrics_host, config.metrics_port) as metrics:
        try:
            result = run_generate(config, report=metrics.wrap(reporter))
        finally:
            reporter.close()  # a live display must give the terminal back, even on error
    click.echo(result.message)
    if result.exit_code != 0:
        click.echo(f"resume with the same command; watch with: regen status {result.output_dir}")
    sys.exit(result.exit_code)


def on_ray(config: GenerateConfig, shards: int | None, address: str | None) -> int:
    if not shards:
        raise click.UsageError("--executor ray needs --shards N (how many parts to run)")
    results = run_on_ray(config, shards, address)
    for r in results:
        click.echo(f"shard {r.part} ({r.host}, pid {r.pid}): exit {r.exit_code}: {r.message}")
    return max(r.exit_code for r in results)
