"""Where a run's score lives: RUN/score beside its completions, in a local run or a bucket.

A bucket run's score is worked on in a local mirror (the rows are appended as they finish,
which a bucket does not take cheaply) and uploaded back beside the run when scoring ends or
stops; readers (check's report, export's --max-acceptance, the dataset card) fetch it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from regen.finished.score_rows import ROWS
from regen.storage import LocalStore, Store, open_store
from regen.storage.destination import Destination
from regen.storage.publish import fetch_folder, worked_locally
from regen.storage.store import default_staging

SCORE = "score"
SCORE_JSON = "score.json"


def _grows(name: str) -> bool:
    return name.endswith(ROWS)  # the per-row results are appended to; the reports rewritten


def score_where(run: str | Path, output_dir: Destination | None = None) -> str:
    """RUN/score as the user names it (a path, or the bucket URL), or --output-dir's."""
    return output_dir.where if output_dir is not None else _score_url(open_store(run))


def _score_url(store: Store) -> str:
    return f"{store.where.rstrip('/')}/{SCORE}"


@contextmanager
def score_folder(run: str | Path, output_dir: Destination | None = None) -> Iterator[Path]:
    """RUN/score (or `output_dir`, in its place: a run that cannot be written), to write in:
    the folder itself when local, a local mirror of it for a bucket (fetched first, so a score
    goes on from the rows already scored)."""
    if output_dir is None:
        store = open_store(run)
        local = store.layout.root / SCORE if isinstance(store, LocalStore) else None
        output_dir = Destination(str(local) if local else _score_url(store), "the score folder")
    if not output_dir.is_bucket:
        with output_dir.local_folder() as folder:  # a file or a device there: refused
            yield folder
        return
    url = output_dir.where
    with worked_locally(url, default_staging(url), _grows) as local_copy:
        yield local_copy


def score_json_of(run: str | Path) -> Path | None:
    """RUN/score/score.json to read (a bucket run's fetched first), or None if not scored."""
    store = open_store(run)
    if isinstance(store, LocalStore):
        path = store.layout.root / SCORE / SCORE_JSON
    else:
        url = _score_url(store)
        path = fetch_folder(url, default_staging(url), _grows) / SCORE_JSON
    return path if path.is_file() else None
