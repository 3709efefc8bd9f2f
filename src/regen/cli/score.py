"""`regen score`: how many tokens a drafter would accept on a run, per domain."""

from __future__ import annotations

import click

from regen.check import Encoder
from regen.cli.checkpoint_options import checkpoint_options, checkpoint_settings
from regen.cli.hints import tokenizer_hint
from regen.cli.options import Command, option
from regen.cli.paths import InputPath, OutputPath
from regen.cli.rowbar import row_progress
from regen.cli.worker_options import worker_options, workers_of
from regen.errors import ConfigError
from regen.finished.holdout import ALL, HOLDOUT, SPLITS, Holdout
from regen.fleet.openai_env import resolve_api_key
from regen.score import ScoreSettings, score_folder, score_run, score_where, write_report
from regen.score.compare import parse_ks
from regen.score.drafts import open_drafts, require_a_draft, target_passes
from regen.score.engine import FOLDER as ENGINE_FOLDER
from regen.score.engine import engine_report
from regen.score.ngram import ngram_settings
from regen.score.replay import FOLDER as REPLAY_FOLDER
from regen.score.replay import ReplayFleet, replay_report
from regen.score.results import TAU_K
from regen.score.rows import GROUP_BY, Selection
from regen.score.skips import require_scored
from regen.score.table import render_text
from regen.score.target_probs import open_target, with_target
from regen.storage import require_runs
from regen.storage.destination import Destination

DEFAULT_SAMPLE = 200


@click.command(cls=Command)
@click.argument("run", metavar="RUN", type=OutputPath("run"))  # RUN/score is written
@option(
    "--draft",
    "drafts",
    multiple=True,
    metavar="D",
    help="A .gguf draft model, a folder (a Hugging Face draft model or a speculators "
    "EAGLE-3 or DFlash checkpoint), `ngram` (model-free baseline) or `embedded` (the demo "
    "model). Repeat to compare drafts side by side.",
)
@option(
    "--target-model",
    metavar="M",
    help="The target, loaded here: `embedded`, a .gguf or a Hugging Face folder. An EAGLE-3 "
    "or DFlash draft reads its hidden states (a folder or `embedded`) [default: the "
    "verifier the checkpoint names]; a GGUF draft that samples gets its probability of "
    "each answer token at the run's temperature, top-k and top-p from one teacher-forced "
    "pass (a .gguf or `embedded`), for sampled rows the run kept no such logprobs "
    "for.",
)
@option(
    "--ngram-lookup",
    metavar="MIN-MAX",
    help="The n-gram draft's shortest and longest lookup (vLLM's prompt_lookup_min/max) "
    "[default: what the run's `regen serve` fleet speculated with, else vLLM's "
    "5-5].",
)
@option(
    "--draft-servers",
    multiple=True,
    multi_value=True,
    metavar="URL...",
    help="Servers of a draft that return prompt log-probs (vLLM /v1/completions, "
    "SGLang /generate); retried and balanced like generate's fleet.",
)
@option(
    "--draft-api",
    type=click.Choice(["vllm", "sglang"]),
    default="vllm",
    show_default=True,
    help="How --draft-servers are asked for prompt log-probs.",
)
@option(
    "--api-key-env",
    metavar="VAR",
    help="Read the --draft-servers' API key from this variable [default: OPENAI_API_KEY when set].",
)
@option(
    "--from-engine",
    is_flag=True,
    help="No draft: tabulate in RUN/score/engine/ the acceptance the serving engine "
    "(vLLM or SGLang) reported per answer, as generate kept it.",
)
@option(
    "--replay-servers",
    multiple=True,
    multi_value=True,
    metavar="URL...",
    help="No draft: send the run's prompts at temperature 0 to these spec-decoding servers "
    "and tabulate their per-request acceptance (writes RUN/score/replay/).",
)
@option("--model", help="The model name to ask --replay-servers for [default: theirs].")
@option(
    "--tokenizer",
    help="Target tokenizer: directory, .gguf file, hub name, or `embedded` (needed with a draft).",
)
@option("--chat-template", help="Jinja file that overrides the tokenizer's chat template.")
@option(
    "--by",
    type=click.Choice(GROUP_BY),
    default="category",
    show_default=True,
    help="Group rows by prepare's category, source dataset, turns or answer length.",
)
@option(
    "--sample",
    type=int,
    default=DEFAULT_SAMPLE,
    show_default=True,
    help="Rows scored per group (seeded, the same rows every time).",
)
@option("--all", "score_all", is_flag=True, help="Score every row instead of a sample.")
@option("--seed", type=int, default=0, show_default=True)
@option(
    "--holdout",
    type=float,
    metavar="F",
    help="The held-out split `export --holdout F` wrote (drawn again here from the run's "
    "prompt ids, per category): score only --split's rows.",
)
@option(
    "--holdout-seed",
    type=int,
    default=0,
    show_default=True,
    help="The seed the export's --holdout-seed named.",
)
@option(
    "--split",
    type=click.Choice(SPLITS),
    default=None,
    help="Which side of --holdout to score [default: holdout].",
)
@option(
    "--k",
    "k_spec",
    default="1-8",
    show_default=True,
    metavar="K",
    help="Draft lengths to report: 3, 1-8 or 2,4,8.",
)
@option(
    "--baseline",
    type=InputPath(exists=True, dir_okay=False),
    help="An earlier score.json: the same rows, paired, before and after.",
)
@option(
    "--compare",
    is_flag=True,
    help="Each draft against the last one named (yours, then the reference): the difference "
    "in tau(k) per group with a 95% interval paired by row, by depth and by position in the "
    "answer, and where the gap is widest.",
)
@option("--threads", type=int, default=2, show_default=True, help="CPU threads of a GGUF draft.")
@option("--json", "as_json", is_flag=True, help="Print the report as JSON (for scripts).")
@option(
    "-o",
    "--output-dir",
    "out",
    type=OutputPath("folder"),
    metavar="DIR",
    help="Write the score here instead of RUN/score (a run that cannot be written); a "
    "later score with the same DIR resumes from its rows.",
)
@checkpoint_options
@worker_options
def score(
    run,
    drafts,
    target_model,
    ngram_lookup,
    draft_servers,
    draft_api,
    api_key_env,
    from_engine,
    replay_servers,
    model,
    tokenizer,
    chat_template,
    by,
    sample,
    score_all,
    seed,
    holdout,
    holdout_seed,
    split,
    k_spec,
    baseline,
    compare,
    threads,
    as_json,
    out,
    **spread,
) -> None:
    """Score RUN's answers with a draft: tokens accepted per verify step, per group.

    Writes RUN/score/, or --output-dir (score.json, score.txt and each draft's per-row
    results, from which an interrupted score resumes)."""
    require_runs([run])  # these before the tokenizer loads
    held = Holdout(holdout, holdout_seed) if holdout is not None else None
    split = split or (HOLDOUT if held else ALL)
    selection = Selection(by, None if score_all else sample, seed, holdout=held, split=split)
    if from_engine or replay_servers:
        fleet = ReplayFleet(tuple(replay_servers), model, api_key_env) if replay_servers else None
        _from_engine(run, selection, fleet, as_json, out)
        return
    require_a_draft(list(drafts), list(draft_servers))
    if not tokenizer:
        raise ConfigError(
            "--tokenizer is needed to score a draft",
            hint=tokenizer_hint([run]) + "; or --from-engine, with no draft",
        )
    ks = parse_ks(k_spec)
    checkpoint = checkpoint_settings(spread, target_model, max(max(ks), TAU_K))
    key = resolve_api_key(api_key_env, embedded=not draft_servers).value
    encoder = Encoder.load(tokenizer, chat_template=chat_template)
    settings = ScoreSettings(selection, ks, tokenizer, chat_template=chat_template)
    with (
        score_folder(run, out) as folder,
        open_drafts(
            list(drafts),
            list(draft_servers),
            api=draft_api,
            threads=threads,
            api_key=key,
            ngram=ngram_settings(run, ngram_lookup),
            checkpoint=checkpoint,
        ) as opened,
        open_target(target_model, opened, threads) as target,
        row_progress("score") as on_row,
    ):
        for note in (line for d in opened for line in getattr(d, "notes", ())):
            click.echo(note, err=True)  # e.g. the layers an EAGLE-3 head reads
        workers = workers_of(spread, per_worker=threads)  # a GGUF draft runs --threads each
        report = score_run(
            run,
            with_target(opened, target),
            encoder,
            settings,
            folder,
            on_row=on_row,
            workers=workers,
        )
        for line in target_passes(opened):
            click.echo(line, err=True)  # what the hidden-state pass cost, once for all
        if baseline:
            report.attach_baseline(baseline)
        if compare:
            report.attach_comparison()
        json_path, text_path = write_report(report, folder)
    click.echo(json_path.read_text() if as_json else render_text(report))
    if not as_json:
        click.echo(f"\nwritten: {score_where(run, out)}/{json_path.name} and {text_path.name}")
    require_scored(report)  # a draft with no row scored: exit 3, with the reasons and the fix


def _from_engine(
    run: str,
    selection: Selection,
    fleet: ReplayFleet | None,
    as_json: bool,
    out: Destination | None,
) -> None:
    """The engine's own acceptance: of the run's answers, or of a replay of its prompts."""
    with score_folder(run, out) as folder:
        if fleet is None:
            report, where = engine_report(run, selection, folder), ENGINE_FOLDER
        else:
            report, where = replay_report(run, fleet, selection, folder), REPLAY_FOLDER
        json_path, text_path = write_report(report, folder / where)
    click.echo(json_path.read_text() if as_json else render_text(report))
    if not as_json:
        click.echo(
            f"\nwritten: {score_where(run, out)}/{where}/{json_path.name} and {text_path.name}"
        )
