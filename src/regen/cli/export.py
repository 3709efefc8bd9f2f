"""`regen export`: write a run in the format a trainer reads (SpecForge, speculators, ...)."""

from __future__ import annotations

from pathlib import Path

import click

from regen.check import Encoder
from regen.cli.options import Command, option
from regen.cli.rowbar import row_progress
from regen.export import Filters, export_run, make_format
from regen.export.by_score import ORDERS, ScoreSelect
from regen.export.formats import FORMATS
from regen.jsonio import atomic_write_json

PATH = click.Path(path_type=Path)


@click.command(cls=Command)
@click.argument("output_dirs", nargs=-1, required=True, metavar="RUN...")  # str: URLs too
@option("-o", "--output-dir", "out", required=True, type=PATH, metavar="DIR", aliases=["--out"],
        help="Directory for train/validation files.")  # fmt: skip
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(FORMATS)),
    default="specforge",
    show_default=True,
    help="The trainer target: specforge, specforge-tokenized, speculators, sharegpt "
    "(axolotl/LLaMA-Factory from/value) or tokenized (Parquet for datasets).",
)
@click.option(
    "--file-type",
    type=click.Choice(["jsonl", "parquet"]),
    help="Default: parquet for tokenized, jsonl otherwise.",
)
@click.option(
    "--reasoning",
    type=click.Choice(["inline", "field", "drop"]),
    default="inline",
    show_default=True,
    help="Conversation formats: <think> inline, a reasoning_content field, or none.",
)
@click.option("--tokenizer", help="Target tokenizer (tokenized format and mask filters).")
@click.option("--chat-template", help="Jinja file that overrides the tokenizer's chat template.")
@click.option(
    "--template-tokens", type=click.Choice(["train", "context"]), default="train", show_default=True
)
@click.option("--drop-degenerate", is_flag=True, help="Drop empty answers and tiny masks.")
@click.option("--degenerate-at", type=int, default=10, show_default=True)
@click.option("--drop-truncated", is_flag=True, help="Drop finish_reason=length samples.")
@click.option("--min-supervised-tokens", type=int, default=0, show_default=True)
@click.option(
    "--eval-fraction",
    type=float,
    default=0.0,
    show_default=True,
    help="Share of ids (by stable hash) written to the validation split.",
)
@click.option("--merge-into", type=PATH, help="An earlier export to add these samples to.")
@click.option("--report", type=PATH, help="Write the export summary as JSON here.")
@click.option("--overwrite", is_flag=True, help="Replace an export already in --output-dir.")
@click.option(
    "--max-acceptance",
    type=float,
    metavar="X",
    help="Drop rows whose answer the drafter already predicts (top-1 > X; regen score).",
)
@click.option(
    "--order",
    type=click.Choice(ORDERS),
    default="as-read",
    show_default=True,
    help="hard-first: rows the drafter predicts worst first (regen score).",
)
@click.option(
    "--score",
    "score_json",
    type=PATH,
    help="The score.json to select by (default RUN/score/score.json).",
)
def export(output_dirs, out, fmt, file_type, reasoning, tokenizer, chat_template, template_tokens,
           drop_degenerate, degenerate_at, drop_truncated, min_supervised_tokens, eval_fraction,
           merge_into, report, overwrite, max_acceptance, order, score_json) -> None:  # fmt: skip
    """Export the runs RUN... to --output-dir DIR, loadable with datasets.load_dataset(DIR)."""
    encoder = None
    if tokenizer:
        encoder = Encoder.load(
            tokenizer, chat_template=chat_template, template_tokens=template_tokens
        )
    filters = Filters(drop_degenerate, drop_truncated, min_supervised_tokens, degenerate_at)
    by_score = None
    if max_acceptance is not None or order != "as-read" or score_json:
        score_json = score_json or Path(output_dirs[0]) / "score" / "score.json"
        by_score = ScoreSelect.load(score_json, max_acceptance, order)
    target = make_format(fmt, reasoning)
    file_type = file_type or target.file_types[0]
    with row_progress("export") as on_row:
        summary = export_run(output_dirs, out, target, encoder=encoder,
                             filters=filters, eval_fraction=eval_fraction, file_type=file_type,
                             merge_into=merge_into, overwrite=overwrite, on_row=on_row,
                             by_score=by_score)  # fmt: skip
    click.echo(summary.render())
    if report:
        atomic_write_json(report, summary.to_json())
