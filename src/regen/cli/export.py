"""`regen export`: write a run in the format a trainer reads (SpecForge, speculators, ...),
with a dataset card, and optionally a draft vocabulary and a push to the Hub."""

from __future__ import annotations

from pathlib import Path

import click

from regen.check import Encoder
from regen.check.card import CardCheck
from regen.check.rules import parse_limits
from regen.cli.export_options import command_line, dataset_options, selection_options
from regen.cli.hints import Choice, tokenizer_hint
from regen.cli.options import Command, option
from regen.cli.paths import InputPath, OutputPath
from regen.cli.rowbar import row_progress
from regen.cli.worker_options import worker_options, workers_of
from regen.errors import ConfigError
from regen.export import ExportRequest, ExportSummary, Filters, export_run, make_format
from regen.export.by_score import ORDERS, ScoreSelect
from regen.export.card import CARD, FACTS
from regen.export.card_facts import parse_licenses
from regen.export.files import JSONL_MB, MARKER, SHARD_BYTES
from regen.export.formats import FORMATS
from regen.export.hub_push import Push
from regen.export.publish import Publish, finish
from regen.finished.holdout import Holdout
from regen.storage import require_runs
from regen.storage.destination import Destination

# published last to a bucket: once they are there, the export is whole
LAST = (CARD, FACTS, MARKER)
# trainers' names for what one of our formats writes
AXOLOTL = "axolotl reads the ShareGPT export in its layout: --format sharegpt-axolotl"
LLAMA_FACTORY = "LLaMA-Factory reads the ShareGPT export: --format sharegpt-llamafactory"
STAGING = "the export is built there, on this machine, before its upload"
OTHER_NAMES = {"axolotl": AXOLOTL, "llama-factory": LLAMA_FACTORY, "llamafactory": LLAMA_FACTORY}


@click.command(cls=Command)
@click.argument("output_dirs", nargs=-1, required=True, metavar="RUN...")  # str: URLs too
@option(
    "-o",
    "--output-dir",
    "out",
    required=True,
    type=OutputPath("folder"),
    metavar="DIR",
    aliases=["--out"],
    help="Directory (or bucket URL) for the dataset: data/<domain>/<split>-*.<ext>, "
    "README.md, regen.json.",
)
@click.option(
    "--format",
    "fmt",
    type=Choice(list(FORMATS), pointers=OTHER_NAMES),
    default="specforge",
    show_default=True,
    help="The trainer target (see the format table in docs/export.md).",
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
@selection_options
@dataset_options
@click.option(
    "--merge-into", type=InputPath(buckets=True), help="An earlier export to add these samples to."
)
@click.option("--report", type=OutputPath("file"), help="Write the export summary as JSON here.")
@click.option(
    "--max-file-mb",
    type=click.FloatRange(min=0),
    metavar="MB",
    help=f"Start a split's next file past MB megabytes [JSONL {JSONL_MB}; Parquet "
    f"{SHARD_BYTES >> 20}, of row data] (0: one file a split; SpecForge holds a whole file "
    "in memory, see docs/training.md).",
)
@click.option(
    "--staging-dir",
    type=OutputPath("folder", local=STAGING),
    metavar="DIR",
    help="With a bucket --output-dir: where the export is built before its upload (about "
    "the dataset's size; removed after) [$TMPDIR or /tmp].",
)
@click.option("--overwrite", is_flag=True, help="Replace an export already in --output-dir.")
@click.option(
    "--max-acceptance",
    type=float,
    metavar="X",
    help="Drop rows the drafter already predicts (top-1 > X; see regen score).",
)
@click.option(
    "--order",
    type=click.Choice(ORDERS),
    default="as-read",
    show_default=True,
    help="hard-first: rows the drafter predicts worst first (see regen score).",
)
@click.option(
    "--score",
    "score_json",
    type=InputPath(),
    help="score.json to select by (default: the first run's score/score.json).",
)
@worker_options
def export(output_dirs, out: Destination, merge_into, report, staging_dir, **o) -> None:
    """Export the runs RUN... to --output-dir DIR, loadable with datasets.load_dataset(DIR)."""
    require_runs(output_dirs)  # before the tokenizer loads
    with out.local_folder(last=LAST, staging=staging_dir) as folder:
        summary, facts = _export(output_dirs, folder, out, _merged(merge_into, out, folder), **o)
    _say(summary, facts, out)  # once published: a bucket's export is whole by now
    if report:
        report.write_json(summary.to_json())


def _merged(merge_into: str | Path | None, out: Destination, folder: Path) -> Path | None:
    """The --merge-into folder to read: a bucket export only as the --output-dir itself
    (fetched into `folder`)."""
    if merge_into is None or not isinstance(merge_into, str):
        return merge_into
    if merge_into.rstrip("/") == out.where.rstrip("/"):
        return folder
    raise ConfigError(
        f"--merge-into {merge_into}: an export in a bucket can be merged into only as the "
        "--output-dir itself",
        hint=f"pass --output-dir {merge_into} too, or copy that export to a local folder",
    )


def _export(
    output_dirs,
    out: Path,
    named: Destination,
    merge_into: Path | None,
    fmt,
    file_type,
    reasoning,
    overwrite,
    **o,
) -> tuple[ExportSummary, dict]:
    encoder = _encoder(output_dirs, fmt, o)
    filters = Filters(
        o["drop_degenerate"], o["drop_truncated"], o["min_supervised_tokens"], o["degenerate_at"]
    )
    target = make_format(fmt, reasoning, o["supervise"])
    judge = CardCheck(parse_limits(o["limits"]))
    workers = workers_of(o)
    with row_progress("export") as on_row:
        request = ExportRequest(
            output_dirs,
            out,
            target,
            encoder=encoder,
            filters=filters,
            eval_fraction=o["eval_fraction"],
            split_seed=o["split_seed"],
            file_type=file_type or target.file_types[0],
            merge_into=merge_into,
            overwrite=overwrite,
            judge=judge,
            count_tokens=o["draft_vocab_size"] is not None,
            by_score=ScoreSelect.requested(
                output_dirs, o["max_acceptance"], o["order"], o["score_json"]
            ),
            holdout=Holdout(o["holdout"], o["holdout_seed"]) if o["holdout"] is not None else None,
            out_name=named.where if named.is_bucket else None,  # else its absolute path
            max_file_bytes=None if o["max_file_mb"] is None else int(o["max_file_mb"] * 2**20),
        )
        summary = export_run(request, on_row=on_row, workers=workers)
    return summary, finish(out, summary, encoder, _publish(output_dirs, o))


def _encoder(output_dirs, fmt: str, o: dict) -> Encoder | None:
    """The target's tokenizer, when --tokenizer is given; refused when the format or the
    loss-mask filters need one and it is not."""
    needs = FORMATS[fmt].needs_tokenizer or o["drop_degenerate"] or o["min_supervised_tokens"]
    if needs and not o["tokenizer"]:
        what = f"--format {fmt}" if FORMATS[fmt].needs_tokenizer else "the loss-mask filters"
        raise ConfigError(f"{what} needs --tokenizer", hint=tokenizer_hint(output_dirs))
    if not o["tokenizer"]:
        return None
    return Encoder.load(
        o["tokenizer"],
        chat_template=o["chat_template"],
        template_tokens=o["template_tokens"],
        supervise=o["supervise"],
    )


def _publish(output_dirs, o: dict) -> Publish:
    """What is written after the data: the draft vocabulary, the card, the push."""
    hub = None
    if o["push_to_hub"]:
        hub = Push(o["push_to_hub"], o["private"], o["revision"], o["allow_failed_check"])
    return Publish(
        runs=[str(r) for r in output_dirs],
        command=command_line(click.get_current_context()),
        licenses=parse_licenses(o["licenses"]),
        language=list(o["language"]),
        pretty_name=o["pretty_name"],
        tokenizer=o["tokenizer"],
        draft_vocab_size=o["draft_vocab_size"],
        target_vocab_size=o["target_vocab_size"],
        check_report=o["check_report"],
        hub=hub,
    )


def _say(summary: ExportSummary, facts: dict, named: Destination) -> None:
    click.echo(summary.render())
    click.echo(
        f"card: {named.join(CARD)} (license {facts['license']}, check {facts['check_verdict']})"
    )
    if facts.get("draft_vocab"):
        v = facts["draft_vocab"]
        click.echo(
            f"draft vocabulary: {v['size']} ids cover {v['coverage']:.1%} of "
            f"{v['masked_tokens']} supervised tokens; {', '.join(v['files'])}"
        )
    if facts.get("pushed"):
        click.echo(f"pushed: {facts['pushed']}")
