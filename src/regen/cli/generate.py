"""`regen generate`: prompts -> completions across a server fleet, exactly once, resumable."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

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
from regen.cli.paths import OutputPath
from regen.cli.run_options import (
    config_from,
    fleet_options,
    request_options,
    sampling_options,
    work_shape_options,
)
from regen.executors import EXECUTORS, executor_named
from regen.format.part import parse_part, part_from_env

STAGING = "the shards wait there, on this machine, for their upload"


@click.command(cls=Command)
@option(
    "--prompts",
    required=True,
    metavar="FILE",
    group=INPUT,
    to="input.prompts",
    help="Prompt JSONL (.zst ok) or an OpenAI/vLLM batch file: a path or an fsspec URL.",
)
@work_shape_options
@option(
    "--limit",
    type=int,
    metavar="N",
    group=INPUT,
    to="input.limit",
    help="Try the first N prompts only; the same command without it does the rest.",
)
@option(
    "--allow-changed-input",
    is_flag=True,
    group=INPUT,
    to="input.allow_changed_input",
    help="Resume although the prompt file changed.",
)
@fleet_options
@sampling_options
@option(
    "--allow-changed-sampling",
    is_flag=True,
    group=SAMPLING,
    to="input.allow_changed_sampling",
    help="Resume although sampling flags changed.",
)
@request_options
@option(
    "--stall-timeout",
    type=float,
    default=300,
    show_default=True,
    group=RELIABILITY,
    to="fleet.timeouts.stall",
    help="With --stream: seconds of silence before a response counts as stalled.",
)
@option(
    "--max-retries",
    type=int,
    default=5,
    show_default=True,
    group=RELIABILITY,
    to="fleet.retry.max_retries",
    help="Retries of a request after 5xx, 408, 429 or a timeout.",
)
@option(
    "--give-up-after",
    type=float,
    default=1800,
    show_default=True,
    group=RELIABILITY,
    to="fleet.health.give_up_after",
    help="Seconds with every server down before stopping (0: never).",
)
@option(
    "--health-interval",
    type=float,
    default=15,
    show_default=True,
    group=RELIABILITY,
    to="fleet.health.liveness_interval",
    help="Seconds between liveness checks of a busy server.",
)
@option(
    "--drain-timeout",
    type=float,
    default=60,
    show_default=True,
    group=RELIABILITY,
    to="limits.drain_timeout",
    help="On SIGINT/SIGTERM: seconds to let requests in flight finish.",
)
@option(
    "--retry-errors",
    is_flag=True,
    group=RELIABILITY,
    to="input.retry_errors",
    help="Retry what is in errors/.",
)
@option(
    "--abort-on-degenerate",
    is_flag=True,
    group=RELIABILITY,
    to="limits.abort_on_degenerate",
    help="Stop when a quality alarm fires (exit 4).",
)
@option(
    "-o",
    "--output-dir",
    required=True,
    type=OutputPath("run"),  # a str: a Path would fold s3://bucket into s3:/bucket
    metavar="RUN",
    group=OUTPUT,
    to="output.dir",
    help="The run directory, or a bucket URL (s3://bucket/prefix, gs://, az://): "
    "every file of the run goes there.",
)
@option(
    "--staging-dir",
    type=OutputPath("folder", local=STAGING),
    metavar="DIR",
    group=OUTPUT,
    to="output.staging_dir",
    help="With a bucket RUN: local staging for shards not yet uploaded "
    "[~/.cache/regen/staging/<hash of the URL>].",
)
@option(
    "--upload-interval",
    type=float,
    default=300,
    show_default=True,
    group=OUTPUT,
    to="output.upload_interval",
    help="With a bucket RUN: seconds after which an open shard is sealed and uploaded.",
)
@option(
    "--staging-limit-mb",
    type=int,
    default=4096,
    show_default=True,
    group=OUTPUT,
    to="output.upload.staging_limit_bytes",
    into=lambda mb: mb << 20,
    help="With a bucket RUN: pause requests while this much waits to be uploaded.",
)
@option(
    "--shard",
    metavar="I/N",
    group=SCALE,
    to="part",
    into=lambda text: parse_part(text) if text else part_from_env(),
    help="Do part I of N (a stable split by prompt id; N processes share one RUN) "
    "[from SLURM_ARRAY_TASK_ID/_COUNT, or JOB_COMPLETION_INDEX + REGEN_SHARD_COUNT].",
)
@option(
    "--executor",
    type=click.Choice(list(EXECUTORS)),
    default="local",
    show_default=True,
    group=SCALE,
    help="ray: run --shards N parts as Ray tasks (a dead task is retried).",
)
@option("--shards", type=int, metavar="N", group=SCALE, help="With --executor ray: parts.")
@option(
    "--ray-address",
    metavar="ADDR",
    group=SCALE,
    help="With --executor ray: the cluster [default: a new local one].",
)
@option(
    "--compress",
    is_flag=True,
    group=OUTPUT,
    to="output.compress",
    help="Seal completion shards as .jsonl.zst.",
)
@option(
    "--return-token-ids",
    is_flag=True,
    group=OUTPUT,
    to="output.return_token_ids",
    help="Store prompt/completion token ids (vLLM's return_token_ids).",
)
@option(
    "--logprobs",
    is_flag=True,
    group=OUTPUT,
    to="output.logprobs",
    help="Store each answer token's logprob (for `regen score` at the run's temperature).",
)
@option(
    "--display",
    type=click.Choice(["auto", "live", "plain", "none"]),
    default="auto",
    show_default=True,
    group=DISPLAY,
    to="display.mode",
    help="Live panel on a terminal, plain lines in a log (auto picks).",
)
@option(
    "--log-interval",
    type=float,
    default=30,
    show_default=True,
    group=DISPLAY,
    to="display.log_interval",
    help="Seconds between plain summaries.",
)
@option(
    "--metrics-port",
    type=int,
    group=DISPLAY,
    to="display.metrics_port",
    help="Serve Prometheus metrics on this port.",
)
@option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    group=DISPLAY,
    to="display.metrics_host",
    help="Address the metrics endpoint listens on.",
)
def generate(**opts) -> None:
    """Generate completions for every prompt, resuming where a previous run stopped.

    --servers takes one or more URLs: `--servers http://h:30000 http://h:30001`.
    `--prompts -` reads the prompts from standard input.
    """
    logging.basicConfig(level=logging.ERROR, format="%(message)s")
    executor = executor_named(opts["executor"], shards=opts["shards"], address=opts["ray_address"])
    with spooled_stdin(opts["prompts"]) as prompts:
        outcome = executor.run(config_from({**opts, "prompts": prompts}))
    for line in outcome.lines:
        click.echo(line)
    sys.exit(outcome.exit_code)


@contextlib.contextmanager
def spooled_stdin(prompts: str) -> Iterator[str]:
    """`-`: standard input, copied to a temporary file first (the run reads its input more
    than once: checked, fingerprinted, then streamed), removed afterwards. A resume is the
    same command with the same input piped in: the fingerprint tells whether it is."""
    if prompts != "-":
        yield prompts
        return
    fd, name = tempfile.mkstemp(prefix="regen-stdin-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out)
        yield name
    finally:
        os.unlink(name)
