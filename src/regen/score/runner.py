"""`score` as a library call: pick the rows, tokenise them, run each draft, keep every row's
result (resumable), and pool the results into a report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from regen.errors import InputError
from regen.finished.encode import Encoder
from regen.finished.read import open_run
from regen.finished.record import Completion
from regen.finished.run_state import NOT_JSON, lines_not_json
from regen.finished.score_place import SCORE_JSON
from regen.finished.score_rows import ROWS
from regen.parallel import Workers, flat_map
from regen.score.drafts import Draft
from regen.score.outcome import Outcome
from regen.score.report import DraftScore, ScoreReport, pool
from regen.score.results import RowsFile, folder_for, row_line, skipped_line
from regen.score.rows import Selection, completions, pick
from regen.score.spread import ScoreJob, close_opened, row_or_skip, score_rows
from regen.score.tokens import TokenRow
from regen.storage import Store

RowHook = Callable[[str], None]
ROWS_PER_ITEM = 4  # a draft's forward pass per row: a few rows keep every worker busy


@dataclass
class ScoreSettings:
    selection: Selection
    ks: list[int]
    tokenizer: str  # what --tokenizer named: part of the results' identity
    template_tokens: str = "train"
    chat_template: str | None = None


@dataclass
class _Pass:
    """One draft's pass over the run: rows scored now, rows skipped, and bad records."""

    rows: RowsFile
    on_row: RowHook | None
    scored: int = 0
    invalid: Counter = field(default_factory=Counter)

    def sink(self, row: TokenRow, outcome: Outcome | InputError) -> None:
        if isinstance(outcome, InputError):
            why = outcome.message
            self.rows.append(skipped_line((row.id, row.sample), row.groups, outcome.kind, why))
            return
        self.rows.append(row_line(row, outcome))
        self.scored += 1
        if self.on_row is not None:
            self.on_row(self.rows.folder.name)

    def bad(self, raw: dict, err: InputError) -> None:
        self.invalid[err.kind] += 1


def score_run(
    run: str | Path,
    drafts: list[Draft],
    encoder: Encoder,
    settings: ScoreSettings,
    score_dir: Path,
    *,
    on_row: RowHook | None = None,
    workers: Workers | None = None,
) -> ScoreReport:
    """`workers`: who tokenises and runs a draft that can run in a worker (None: this
    process); the rows file is the same whatever their number."""
    store = open_run(run)
    # bad records are counted by each draft's own pass (every pass reads every record)
    selection = pick(store, settings.selection)
    scans, scores = [], []
    try:
        for draft in drafts:
            draft.check(encoder.tok)
            identity = _identity(draft, settings)
            rows = RowsFile(folder_for(score_dir, draft.name, identity), identity)
            scans.append(_Pass(rows, on_row))
            scores.append(DraftScore(draft.name, identity, rows.path, 0))
        for unit in sharing(drafts):
            if len(unit) == 1:
                (i,) = unit
                _score(store, selection, encoder, drafts[i], scans[i], workers)
            else:
                together = [(drafts[i], scans[i]) for i in unit]
                _score_together(store, selection, encoder, together)
    finally:
        for scan in scans:
            scan.rows.close()
    for score, scan in zip(scores, scans, strict=True):
        score.scored_now = scan.scored
    invalid = scans[-1].invalid if scans else Counter()
    scores += earlier_drafts(score_dir, scores, settings)
    report = pool(str(store.where), scores, selection, settings.ks, dict(invalid))
    if invalid.get(NOT_JSON):  # the pass above cannot say where (its workers parse them)
        report.invalid_lines = lines_not_json([run])
    return report


def _identity(draft: Draft, settings: ScoreSettings) -> dict:
    identity = {
        "draft": draft.identity,
        "tokenizer": settings.tokenizer,
        "chat_template": settings.chat_template,
        "template_tokens": settings.template_tokens,
    }
    if hasattr(draft, "target_identity"):  # --target-model (target_probs.py)
        identity["target"] = draft.target_identity
    return identity


def earlier_drafts(score_dir: Path, now: list[DraftScore], settings: ScoreSettings) -> list:
    """The drafts an earlier `regen score` of this run left in score.json, scored with the same
    tokenizer and template and not scored now: their rows are on disk, so they are pooled
    again with this call's selection and a second score adds to the first instead of
    dropping it from score.json."""
    path = score_dir / SCORE_JSON
    if not path.is_file():
        return []
    try:
        earlier = orjson.loads(path.read_bytes())["drafts"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as err:
        raise InputError(
            f"{path} is not a score.json that regen wrote ({err})",
            hint="move it away; the drafts' rows beside it are kept and resumed",
        ) from err
    names = {d.name for d in now}
    same = {
        "tokenizer": settings.tokenizer,
        "chat_template": settings.chat_template,
        "template_tokens": settings.template_tokens,
    }
    kept = []
    for draft in earlier:
        identity = draft["identity"]
        rows = folder_for(score_dir, draft["name"], identity) / ROWS
        matches = all(identity.get(k) == v for k, v in same.items())
        if draft["name"] not in names and matches and rows.is_file():
            kept.append(DraftScore(draft["name"], identity, rows, 0, earlier=True))
    return kept


def _score(
    store: Store,
    selection: Selection,
    encoder: Encoder,
    draft: Draft,
    scan: _Pass,
    workers: Workers | None = None,
) -> None:
    """Every row still to score through the draft, in workers when the draft can run there."""
    recipe = getattr(draft, "recipe", None)
    if workers is None or workers.count == 1 or recipe is None:
        draft.run(_todo(store, selection, encoder, draft, scan), scan.sink)
        return
    raws = (c.raw for c in _wanted(store, selection, scan))
    job = ScoreJob(encoder, recipe)
    try:
        for outcome in flat_map(workers, job, score_rows, raws, size=ROWS_PER_ITEM):
            if isinstance(outcome, dict):
                scan.rows.append(outcome)
            else:
                scan.sink(*outcome)
    finally:
        close_opened()


def _wanted(store: Store, selection: Selection, scan: _Pass) -> Iterator[Completion]:
    """The chosen rows not already in the results file."""
    done = scan.rows.done()
    for completion in completions(store.iter_lines("completions"), scan.bad):
        if completion.key not in done and selection.wants(completion.key):
            yield completion


def _todo(
    store: Store, selection: Selection, encoder: Encoder, draft: Draft, scan: _Pass
) -> Iterator[TokenRow]:
    """The rows still to score: chosen, not already in the results file, tokenisable and short
    enough for the draft (the others get a `skipped` line, so they are counted, not lost)."""
    for completion in _wanted(store, selection, scan):
        row = row_or_skip(completion, encoder, draft)
        if isinstance(row, TokenRow):
            yield row
        else:
            scan.rows.append(row)


def write_report(report: ScoreReport, folder: Path) -> tuple[Path, Path]:
    from regen.jsonio import atomic_write_bytes, atomic_write_json
    from regen.score.table import render_text

    json_path, text_path = folder / SCORE_JSON, folder / "score.txt"
    atomic_write_json(json_path, report.to_json())
    atomic_write_bytes(text_path, (render_text(report) + "\n").encode())
    return json_path, text_path


def sharing(drafts: list[Draft]) -> list[list[int]]:
    """The drafts by index, those that read one target's pass (`shared`) in one unit, in
    the order named."""
    units: dict[int, list[int]] = {}
    for i, draft in enumerate(drafts):
        shared = getattr(draft, "shared", None)
        units.setdefault(id(shared) if shared is not None else -1 - i, []).append(i)
    return list(units.values())


def _score_together(
    store: Store, selection: Selection, encoder: Encoder, together: list[tuple[Draft, _Pass]]
) -> None:
    """Drafts that read one target's hidden states, over the rows any of them still needs:
    each such row goes through the target once (hidden_draft.run_together)."""
    from regen.score.checkpoints.hidden_draft import run_together

    shared = getattr(together[0][0], "shared")  # noqa: B009  (every member has one)
    done = [scan.rows.done() for _, scan in together]
    bad = together[0][1]
    for _, scan in together[1:]:
        scan.invalid = bad.invalid  # one read of the records: its bad lines count for all

    def todo() -> Iterator[tuple[TokenRow, list]]:
        for completion in completions(store.iter_lines("completions"), bad.bad):
            if not selection.wants(completion.key):
                continue
            row, readers = None, []
            for (draft, scan), its_done in zip(together, done, strict=True):
                if completion.key in its_done:
                    continue
                got = row_or_skip(completion, encoder, draft)
                if isinstance(got, TokenRow):
                    row = got
                    readers.append((draft, scan.sink))
                else:
                    scan.rows.append(got)
            if row is not None:
                yield row, readers

    run_together(shared, todo())
