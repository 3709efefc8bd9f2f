"""`regen check`: tokenise a run with the target's template and judge whether it is trainable."""

from __future__ import annotations

import contextlib
import sys

import click

from regen.check import Encoder, StatOptions, check_run
from regen.check.prompt_traces import RULE, check_prompt_traces
from regen.check.report_html import about_check, render_html
from regen.check.report_text import by_sample, render_text
from regen.check.rules import parse_limits
from regen.check.show import render_sample
from regen.cli.hints import tokenizer_hint
from regen.cli.options import Command
from regen.cli.paths import OutputPath, local_file
from regen.cli.rowbar import row_progress
from regen.cli.worker_options import worker_options, workers_of
from regen.errors import ConfigError
from regen.jsonio import is_file
from regen.score.html import acceptance_section
from regen.storage import require_runs
from regen.storage.destination import Destination

FILE = OutputPath("file")
HTML_SAMPLES = 10  # failing samples per rule the HTML report lists


@click.command(cls=Command)
@click.argument("output_dirs", nargs=-1, required=True, metavar="RUN...")
@click.option(
    "--tokenizer",
    help="Target tokenizer: directory, .gguf file, hub name, or `embedded` (the demo model).",
)
@click.option("--chat-template", help="Jinja file that overrides the tokenizer's chat template.")
@click.option(
    "--template-tokens",
    type=click.Choice(["train", "context"]),
    default="train",
    show_default=True,
    help="Supervise template-inserted turn text (empty <think></think>) or not.",
)
@click.option(
    "--supervise",
    type=click.Choice(["regenerated", "all"]),
    default="regenerated",
    show_default=True,
    help="Train only the assistant turns the target wrote, or every assistant turn (also "
    "those that came with the prompt).",
)
@click.option("--max-length", type=int, help="Count sequences longer than this many tokens.")
@click.option(
    "--degenerate-at",
    type=int,
    default=10,
    show_default=True,
    help="A loss-mask sum at or below this is degenerate.",
)
@click.option(
    "--min-run",
    type=int,
    default=2,
    show_default=True,
    help="Consecutive supervised tokens a sample needs (DFlash anchors).",
)
@click.option(
    "--max",
    "limits",
    multiple=True,
    metavar="RULE=FRACTION",
    help="Override a rule's threshold, or turn it off with RULE=off.",
)
@click.option("--json", "json_path", type=FILE, help="Write the report as JSON here (or a URL).")
@click.option("--html", "html_path", type=FILE, help="Write a self-contained HTML report here.")
@click.option("--per-sample", type=FILE, help="Write one JSON line per sample here.")
@click.option(
    "--show",
    type=int,
    default=0,
    help="Print N samples with supervised tokens marked: samples of the failing rules first.",
)
@worker_options
def check(
    output_dirs,
    tokenizer,
    chat_template,
    template_tokens,
    supervise,
    max_length,
    degenerate_at,
    min_run,
    limits,
    json_path,
    html_path,
    per_sample,
    show,
    **spread,
) -> None:
    """Tokenise the runs RUN... with the target's template, report, and exit 1 if a rule fails.
    A prompt file in place of the runs: check its tool traces (no tokenizer needed)."""
    thresholds = parse_limits(limits)
    if len(output_dirs) == 1 and is_file(output_dirs[0]):
        check_prompt_file(output_dirs[0], thresholds, json_path, per_sample)
    require_runs(output_dirs)  # before the tokenizer loads
    for report_file in (json_path, html_path, per_sample):
        if report_file is not None:
            report_file.check_writable()  # before the work, not once the report is built
    if not tokenizer:  # required, but the message can name the run's own model
        raise ConfigError("check needs the target's tokenizer", hint=tokenizer_hint(output_dirs))
    encoder = Encoder.load(
        tokenizer, chat_template=chat_template, template_tokens=template_tokens, supervise=supervise
    )
    opts = StatOptions(degenerate_at=degenerate_at, min_run=min_run, max_length=max_length)
    kept = max(show, HTML_SAMPLES if html_path else 0)  # the HTML lists failing samples too
    with row_progress("check") as on_row, local_file(per_sample) as per_sample_path:
        report = check_run(
            output_dirs,
            encoder,
            opts,
            thresholds,
            show=kept,
            per_sample=per_sample_path,
            on_row=on_row,
            workers=workers_of(spread),
        )
    color = sys.stdout.isatty()
    for completion, enc, rules in by_sample(report.shown[:show]):
        click.echo(render_sample(completion, enc, color=color, rule=", ".join(rules)) + "\n")
    click.echo(render_text(report))
    if json_path:
        json_path.write_json(report.to_json())
    if html_path:
        template = getattr(encoder.tok, "chat_template", None)
        about = about_check(output_dirs, tokenizer, template if isinstance(template, str) else None)
        acceptance = acceptance_section(list(output_dirs))
        html_path.write_bytes(render_html(report, about, acceptance).encode())
    sys.exit(0 if report.passed else 1)  # 1: a rule failed (a write that failed exits 6)


def check_prompt_file(
    path: str, thresholds: dict, json_path: Destination | None, per_sample: Destination | None
) -> None:
    """`regen check prompts.jsonl`: only the tool-trace rule applies before a run."""
    limit = thresholds.get(RULE, 0.0)
    with (
        local_file(per_sample) as lines_path,
        open(lines_path, "wb") if lines_path else contextlib.nullcontext() as sink,
    ):
        report = check_prompt_traces(path, limit, sink)
    for line in report.lines():
        click.echo(line)
    if json_path:
        json_path.write_json(report.to_json())
    sys.exit(0 if report.passed else 1)
