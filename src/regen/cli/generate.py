"""`regen generate`: prompts -> completions across a server fleet, exactly once, resumable."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from regen.cli.options import sampling_from, shared_run_options
from regen.display import make_reporter
from regen.fleet.dispatch import HealthPolicy, RetryPolicy
from regen.fleet.server import Timeouts
from regen.metrics import serve_metrics
from regen.run.config import GenerateConfig
from regen.run.generate import generate as run_generate
from regen.run.quality import Thresholds


def server_urls_after_flag(extra: list[str]) -> list[str]:
    """`--servers A B C`: click takes A; B and C arrive as extra arguments. Anything else
    there is a typo, reported as such rather than silently ignored."""
    for arg in extra:
        if arg.startswith("-"):
            raise click.UsageError(f"no such option: {arg}")
        if "://" not in arg:
            raise click.UsageError(
                f"unexpected argument {arg!r} (server URLs look like http://host:port)"
            )
    return extra


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option(
    "--prompts", required=True, help="Prompt JSONL (.zst ok): a path or an fsspec URL (s3://...)."
)
@click.option(
    "--output-dir", type=click.Path(path_type=Path), required=True, help="All run files go here."
)
@shared_run_options
@click.option("--return-token-ids", is_flag=True, help="Store prompt/completion token ids.")
@click.option(
    "--request-timeout",
    type=float,
    default=1800,
    show_default=True,
    help="Seconds for one whole request.",
)
@click.option("--stream", is_flag=True, help="Stream responses, so that a stalled one is noticed.")
@click.option(
    "--stall-timeout", type=float, default=300, show_default=True,
    help="With --stream: seconds of silence before a response counts as stalled.",
)  # fmt: skip
@click.option("--max-retries", type=int, default=5, show_default=True)
@click.option(
    "--give-up-after",
    type=float,
    default=1800,
    show_default=True,
    help="Seconds with every server down before stopping (0: never).",
)
@click.option(
    "--health-interval",
    type=float,
    default=15,
    show_default=True,
    help="Seconds between liveness checks of a busy server.",
)
@click.option(
    "--drain-timeout",
    type=float,
    default=60,
    show_default=True,
    help="On SIGINT/SIGTERM: seconds to let requests in flight finish.",
)
@click.option("--retry-errors", is_flag=True, help="Retry what is in errors/.")
@click.option(
    "--allow-changed-input", is_flag=True, help="Resume although the prompt file changed."
)
@click.option(
    "--allow-changed-sampling", is_flag=True, help="Resume although sampling flags changed."
)
@click.option("--compress", is_flag=True, help="Seal completion shards as .jsonl.zst.")
@click.option("--abort-on-degenerate", is_flag=True, help="Stop when a quality alarm fires.")
@click.option("--display", type=click.Choice(["auto", "live", "plain", "none"]), default="auto")
@click.option(
    "--log-interval",
    type=float,
    default=30,
    show_default=True,
    help="Seconds between plain summaries.",
)
@click.option("--metrics-port", type=int, help="Serve Prometheus metrics on this port.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True)
@click.pass_context
def generate(ctx: click.Context, **opts) -> None:
    """Generate completions for every prompt, resuming where a previous run stopped.

    --servers takes one or more URLs: `--servers http://h:30000 http://h:30001`.
    """
    logging.basicConfig(level=logging.ERROR, format="%(message)s")
    config = GenerateConfig(
        prompts=opts["prompts"], output_dir=opts["output_dir"],
        servers=[*opts["servers"], *server_urls_after_flag(ctx.args)],
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
        log_interval=opts["log_interval"],
        metrics_port=opts["metrics_port"], metrics_host=opts["metrics_host"],
    )  # fmt: skip
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
