"""The loop that owns reading, counting, rejects and dedup; adapters only convert rows.

Sources are read in recipe order, which is the dedup priority: a prompt already seen in an
earlier source (or earlier in the same one) is counted as a duplicate and left out.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from regen.errors import UNWRITABLE_ERRNOS, ConfigError, OutputError
from regen.jsonio import atomic_write_bytes, atomic_write_json
from regen.output_place import Place, place_of
from regen.prepare.blend import Candidate, Candidates, allocate, heap_limit
from regen.prepare.dedup import HashIndex
from regen.prepare.recipe import Recipe
from regen.prepare.rejects import RejectsWriter
from regen.prepare.report import Report, build_report
from regen.prepare.source_reader import Log, SourceReader
from regen.prepare.sources import check_sources
from regen.prepare.stats import SourceStats
from regen.storage.publish import beside, staged
from regen.urls import is_url


@contextmanager
def few_collections(gen0: int = 50_000) -> Iterator[None]:
    """Run the cyclic garbage collector less often while reading sources.

    Every row makes a dozen short-lived dicts and lists that hold no cycles (reference counting
    frees them), yet they trigger a collection every 700 allocations; collecting every 50,000
    made prepare ~18% faster (bench/bench_prepare.py). The setting is restored afterwards.
    """
    old = gc.get_threshold()
    gc.set_threshold(gen0, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def prepare(
    recipe: Recipe,
    output: str | Path,
    *,
    rejects: str | Path | None = None,
    report: str | Path | None = None,
    log: Log = lambda _: None,
    on_row: Callable[[str], None] | None = None,
) -> Report:
    """Write the blended prompt file, the rejects file and the report; return the report.
    Any of them may be a bucket URL (written locally, then uploaded whole). An output that
    is a stream (/dev/null, /dev/stdout) has nothing written beside it: the rejects file and
    the report are written only where given, and `log` says so."""
    check_sources(recipe.sources)
    out = str(output)
    places = [_looked_at(t, flag) for t, flag in ((out, "--output"), (rejects, "--rejects"))]
    _looked_at(report, "--report")
    stream = places[0] is not None and places[0].is_stream
    targets = (
        out,
        _beside(rejects, out, ".rejects.jsonl", stream),
        _beside(report, out, ".report.json", stream),
    )
    skipped = [name for name, target in zip(SIBLINGS, targets[1:], strict=True) if not target]
    if skipped:
        log(
            f"--output {out} is {places[0].about}, and nothing is written beside it: no "
            f"{' and no '.join(skipped)} file (give {' '.join(f'--{n} FILE' for n in skipped)} "
            "to keep them)"
        )
    with staged(*targets) as (output_path, rejects_path, report_path):
        return _prepare_checked(
            recipe,
            output_path,
            rejects_path=rejects_path,
            report_path=report_path,
            names=targets,
            log=log,
            on_row=on_row,
        )


SIBLINGS = ("rejects", "report")


def _looked_at(target: str | Path | None, flag: str) -> Place | None:
    """A local target's place, before any source is read: a device is refused at once."""
    if target is None or is_url(str(target)):
        return None
    return place_of(target, flag)


def _beside(given: str | Path | None, out: str, suffix: str, stream: bool) -> str | None:
    """A file beside the output unless given; None (not written) beside a stream."""
    if given is not None:
        return str(given)
    return None if stream else beside(out, suffix)


def _prepare_checked(
    recipe: Recipe,
    output: Path,
    rejects_path: Path | None,
    report_path: Path | None,
    names: tuple[str, str | None, str | None],
    log: Log,
    on_row: Callable[[str], None] | None,
) -> Report:
    written = [p for p in (output, rejects_path, report_path) if p is not None]
    for path in written:
        _make_parent(path)
    with _writable({path.parent for path in written}):
        return _prepare(
            recipe,
            output,
            rejects_path=rejects_path,
            report_path=report_path,
            names=names,
            log=log,
            on_row=on_row,
        )


ANEW = "prepare writes its files anew from the sources (or give -o another folder)"


@contextmanager
def _writable(folders: set[Path]) -> Iterator[None]:
    """A read-only or full output folder is a message naming it, not a traceback."""
    try:
        yield
    except OSError as exc:
        folder = Path(exc.filename).parent if exc.filename else None
        if exc.errno not in UNWRITABLE_ERRNOS or folder not in folders:
            raise
        raise OutputError.writing(folder, exc, again=ANEW) from exc


def _prepare(
    recipe: Recipe,
    output: Path,
    rejects_path: Path | None,  # None: not written (beside a stream)
    report_path: Path | None,
    names: tuple[str, str | None, str | None],  # as the user gave them: paths or bucket URLs
    log: Log,
    on_row: Callable[[str], None] | None,
) -> Report:
    fixed = sum(s.ask.count or 0 for s in recipe.sources)
    indexes: list[HashIndex] = []
    all_stats: list[SourceStats] = []
    pools: list[Candidates] = []
    with RejectsWriter(rejects_path) as writer, few_collections():
        for spec in recipe.sources:
            reader = SourceReader(recipe, spec, indexes, [s.name for s in all_stats], writer)
            pool = Candidates(heap_limit(spec.ask, fixed, recipe.total))
            all_stats.append(reader.run(pool, log, on_row))
            indexes.append(reader.index)
            pools.append(pool)
    chosen = select(recipe, all_stats, pools)
    atomic_write_bytes(output, b"".join(c.line for _, c in chosen), "--output")
    result = build_report(recipe, all_stats, chosen, names[0], names[1])
    if report_path is not None:
        atomic_write_json(report_path, result.data, "--report")
    return result


def _make_parent(path: Path) -> None:
    """Output folders are created, never assumed (a missing one failed a real launch)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {path.parent}: {exc.strerror}") from exc


def select(
    recipe: Recipe, stats: list[SourceStats], pools: list[Candidates]
) -> list[tuple[str, Candidate]]:
    """Quotas per source, then one seeded shuffle of everything chosen (rank order)."""
    quotas = allocate([s.ask for s in recipe.sources], [s.unique for s in stats], recipe.total)
    chosen = []
    for k, (st, pool, quota) in enumerate(zip(stats, pools, quotas, strict=True)):
        st.requested = quota
        picked = pool.best(quota)
        st.selected = len(picked)
        chosen += [((c.rank, k, c.row), st.name, c) for c in picked]
    chosen.sort(key=lambda item: item[0])
    return [(name, c) for _, name, c in chosen]
